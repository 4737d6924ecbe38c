"""Chat Completions through the gateway with the official openai SDK: an agent loop, recorded."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.fakes.chat import call, completion, streamed, usage
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def client(gw: Gateway, **headers: str) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base,
            api_key="sk-test-clientkey1234567890",
            max_retries=0,
            default_headers=headers or None,
        )
    )


async def run_agent(gw: Gateway, *, stream: bool) -> list[Any]:
    """A real agent loop: ask, run the tools the model asks for, send results, repeat."""
    make = streamed if stream else completion
    gw.provider.queue(
        make(
            tool_calls=[
                call("call_paris", "get_weather", {"city": "Paris"}),
                call("call_tokyo", "get_weather", {"city": "Tokyo"}),
            ],
            response_id="chatcmpl-1",
            use=usage(50, 30, cached=10),
        ),
        make("Paris is sunny and Tokyo is rainy.", response_id="chatcmpl-2", use=usage(90, 12)),
    )
    sdk = client(gw)
    messages: list[Any] = [
        {"role": "system", "content": "You are a weather agent."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
    ]
    answers = []
    for _ in range(5):
        if stream:
            message = await _streamed_message(sdk, messages)
        else:
            result = await sdk.chat.completions.create(
                model="gpt-4o", messages=messages, tools=TOOLS
            )
            message = result.choices[0].message.model_dump(exclude_none=False)
        answers.append(message)
        messages.append(message)
        if not message.get("tool_calls"):
            break
        for tc in message["tool_calls"]:
            city = json.loads(tc["function"]["arguments"])["city"]
            weather = "sunny" if city == "Paris" else "rainy"
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": weather})
    return answers


async def _streamed_message(sdk: openai.AsyncOpenAI, messages: list[Any]) -> dict[str, Any]:
    stream = await sdk.chat.completions.create(
        model="gpt-4o", messages=messages, tools=TOOLS, stream=True
    )
    content, calls = "", {}
    async for chunk in stream:
        assert chunk.choices or chunk.usage is None, "the injected usage chunk leaked"
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(
                    tc.index,
                    {"id": tc.id, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if tc.function and tc.function.name:
                    entry["function"]["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    entry["function"]["arguments"] += tc.function.arguments
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agent_loop_lands_as_one_trace(gateway: Gateway, stream: bool) -> None:
    answers = await run_agent(gateway, stream=stream)
    assert answers[-1]["content"] == "Paris is sunny and Tokyo is rainy."

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["step_count"] == 2
    assert trace["violation_count"] == 0
    first, second = trace["steps"]
    assert [i["kind"] for i in first["input_items"]] == ["instruction", "user"]
    assert [(i["kind"], i["call_id"], i["tool_name"]) for i in first["output_items"]] == [
        ("tool_call", "call_paris", "get_weather"),
        ("tool_call", "call_tokyo", "get_weather"),
    ]
    assert json.loads(first["output_items"][0]["arguments"]) == {"city": "Paris"}
    assert first["stop_reason"] == "tool_calls"
    assert first["raw_stop_reason"] == "tool_calls"
    assert first["usage"]["prompt_tokens"] == 50
    assert first["usage"]["cached_tokens"] == 10
    assert first["provider_request_id"] == "req_chatcmpl-1"
    assert first["response_id"] == "chatcmpl-1"
    assert first["stream"] is stream
    # Only what is new at step 2: the two tool results, not the echoed history.
    assert [(i["kind"], i["call_id"], i["text"]) for i in second["input_items"]] == [
        ("tool_result", "call_paris", "sunny"),
        ("tool_result", "call_tokyo", "rainy"),
    ]
    assert second["output_items"][0]["text"] == "Paris is sunny and Tokyo is rainy."
    assert second["stop_reason"] == "completed"
    assert trace["usage"]["total_tokens"] == 80 + 102


async def test_usage_injection_is_invisible_and_recorded(gateway: Gateway) -> None:
    gateway.provider.queue(streamed("Hello there.", use=usage(7, 3)))
    stream = await client(gateway).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = [c async for c in stream]
    assert all(c.choices for c in chunks)  # the usage-only chunk was not shown
    sent = gateway.provider.received[0].json()
    assert sent["stream_options"] == {"include_usage": True}
    trace = (await gateway.traces())[0]
    assert trace["usage"]["total_tokens"] == 10


async def test_client_asking_for_usage_gets_it_unchanged(gateway: Gateway) -> None:
    gateway.provider.queue(streamed("Hello.", use=usage(7, 3)))
    stream = await client(gateway).chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 10
