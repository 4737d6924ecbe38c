"""The Responses API through the gateway with the official openai SDK: agent loops, recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests import harness
from tests.fakes.provider import Reply
from tests.fakes.responses import (
    function_call,
    message,
    reasoning,
    reply,
    response,
    stream_events,
    streamed,
    usage,
)
from tests.harness import Gateway

# The gateway fixtures, by assignment: parameters of the same name then shadow nothing imported.
provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
ENCRYPTED_MARKER = "ENCMARK-4c1d9e77"
THINKING_MARKER = "THINKMARK-b83f20aa"
ENCRYPTED = f"gAAAAABoxC0_aDtrISw_zls0dyams-{ENCRYPTED_MARKER}-nhm23et1xecYaqlI8y44ih0g9FA5T3R9=="
SUMMARY = "Checking both cities; the user is ann@example.com."


def client(gw: Gateway, **headers: str) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base,
            api_key="sk-test-clientkey1234567890",
            max_retries=0,
            default_headers=headers or None,
        )
    )


def weather_script(*, reasoning_text: str | None = None) -> list[dict[str, Any]]:
    first = response(
        [
            reasoning([SUMMARY], encrypted=ENCRYPTED, text=reasoning_text),
            function_call("call_paris", "get_weather", {"city": "Paris"}),
            function_call("call_tokyo", "get_weather", {"city": "Tokyo"}),
        ],
        response_id="resp_1",
        use=usage(50, 30, cached=10, reasoning=12),
    )
    second = response(
        [message("Paris is sunny and Tokyo is rainy.")],
        response_id="resp_2",
        use=usage(90, 12),
    )
    return [first, second]


async def create(sdk: openai.AsyncOpenAI, *, stream: bool, **kwargs: Any) -> Any:
    """One model request; streamed, the final response comes from the terminal event."""
    if not stream:
        return await sdk.responses.create(**kwargs)
    events = await sdk.responses.create(stream=True, **kwargs)
    final = None
    async for event in events:
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    assert final is not None
    return final


async def run_agent(gw: Gateway, *, stream: bool) -> list[Any]:
    """An Agents-SDK-style loop: echo every output item as input, answer each function call."""
    make = streamed if stream else reply
    gw.provider.queue(*(make(body) for body in weather_script(reasoning_text=THINKING_MARKER)))
    sdk = client(gw)
    items: list[Any] = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]
    answers = []
    for _ in range(5):
        result = await create(
            sdk,
            stream=stream,
            model="gpt-5",
            instructions="You are a weather agent.",
            input=items,
            tools=TOOLS,
            include=["reasoning.encrypted_content"],
        )
        answers.append(result)
        calls = [item for item in result.output if item.type == "function_call"]
        items += [item.model_dump(exclude_none=True) for item in result.output]
        if not calls:
            break
        for call in calls:
            city = json.loads(call.arguments)["city"]
            output = "sunny" if city == "Paris" else "rainy"
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": output}
            )
    return answers


def stored_bytes(tmp_path: Path) -> bytes:
    """Everything SQLite wrote: the database file and its write-ahead log."""
    return b"".join(p.read_bytes() for p in tmp_path.glob("loopwatch.db*"))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agent_loop_lands_as_one_trace(
    gateway: Gateway, stream: bool, tmp_path: Path
) -> None:
    answers = await run_agent(gateway, stream=stream)
    assert answers[-1].output_text == "Paris is sunny and Tokyo is rainy."
    # The client got the reasoning as the provider sent it.
    first_reasoning = answers[0].output[0]
    assert first_reasoning.encrypted_content == ENCRYPTED
    assert first_reasoning.content[0].text == THINKING_MARKER

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["step_count"] == 2
    assert trace["violation_count"] == 0
    first, second = trace["steps"]
    assert first["protocol"] == "responses"
    assert first["stream"] is stream
    assert [(i["kind"], i["text"]) for i in first["input_items"]] == [
        ("instruction", "You are a weather agent."),
        ("user", "Weather in Paris and Tokyo?"),
    ]
    kinds = [(i["kind"], i["call_id"], i["tool_name"]) for i in first["output_items"]]
    assert kinds == [
        ("reasoning", None, None),
        ("tool_call", "call_paris", "get_weather"),
        ("tool_call", "call_tokyo", "get_weather"),
    ]
    thought = first["output_items"][0]
    # The summary is kept, redacted; the reasoning text and encrypted content are not.
    assert thought["text"] == "Checking both cities; the user is [REDACTED:email]."
    assert thought["attrs"]["tokens"] == 12
    assert thought["attrs"]["encrypted"] is True
    assert json.loads(first["output_items"][1]["arguments"]) == {"city": "Paris"}
    assert (first["stop_reason"], first["raw_stop_reason"]) == ("tool_calls", "completed")
    usage_fields = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
    assert [first["usage"][name] for name in usage_fields] == [50, 30, 10, 12]
    assert first["provider_request_id"] == "req_resp_1"
    assert first["response_id"] == "resp_1"
    # Only what is new at step 2: the two function call outputs.
    assert [(i["kind"], i["call_id"], i["text"]) for i in second["input_items"]] == [
        ("tool_result", "call_paris", "sunny"),
        ("tool_result", "call_tokyo", "rainy"),
    ]
    assert [(i["kind"], i["text"]) for i in second["output_items"]] == [
        ("assistant_text", "Paris is sunny and Tokyo is rainy.")
    ]
    assert (second["stop_reason"], second["response_id"]) == ("completed", "resp_2")
    assert trace["usage"]["total_tokens"] == 80 + 102

    # The echoed reasoning went to the provider untouched ...
    echoed = gateway.provider.received[1].json()["input"][1]
    assert echoed["encrypted_content"] == ENCRYPTED
    # ... and no reasoning text or encrypted content reached the database.
    stored = stored_bytes(tmp_path)
    assert b"Paris is sunny" in stored  # the scan sees what was stored
    assert ENCRYPTED_MARKER.encode() not in stored
    assert THINKING_MARKER.encode() not in stored


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_reasoning_passes_to_the_client_byte_for_byte(
    gateway: Gateway, stream: bool, tmp_path: Path
) -> None:
    body = weather_script(reasoning_text=THINKING_MARKER)[0]
    sent: bytes
    if stream:
        events = stream_events(body)
        gateway.provider.queue(Reply(events=events))
        sent = b"".join(events)
    else:
        gateway.provider.queue(reply(body))
        sent = json.dumps(body).encode()
    request = {"model": "gpt-5", "input": "Weather?", "stream": stream}
    async with (
        aiohttp.ClientSession() as session,
        session.post(gateway.openai_base + "/responses", json=request) as answer,
    ):
        received = await answer.read()
    assert received == sent
    await gateway.flush()
    stored = stored_bytes(tmp_path)
    assert ENCRYPTED_MARKER.encode() not in stored
    assert THINKING_MARKER.encode() not in stored


async def test_reasoning_summary_not_stored_when_disabled(make_gateway, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(store_reasoning_summary=False)
    await run_agent(gw, stream=True)
    trace = await gw.trace((await gw.traces())[0]["id"])
    thought = trace["steps"][0]["output_items"][0]
    assert thought["kind"] == "reasoning"
    assert thought["text"] is None
    assert thought["attrs"]["tokens"] == 12  # that it happened, and its size, stay
    assert b"Checking both cities" not in stored_bytes(tmp_path)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_two_step_run_with_previous_response_id(gateway: Gateway, stream: bool) -> None:
    make = streamed if stream else reply
    first_body = response(
        [function_call("call_p", "get_weather", {"city": "Paris"})],
        response_id="resp_a",
        use=usage(40, 20),
    )
    second_body = response(
        [message("Sunny in Paris.")], response_id="resp_b", previous_response_id="resp_a"
    )
    gateway.provider.queue(make(first_body), make(second_body))
    sdk = client(gateway)
    first = await create(sdk, stream=stream, model="gpt-5", input="Paris weather?", tools=TOOLS)
    call = first.output[0]
    second = await create(
        sdk,
        stream=stream,
        model="gpt-5",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=TOOLS,
    )
    assert second.output_text == "Sunny in Paris."

    # A result answering a call the previous response never made: refused before the provider.
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(
            model="gpt-5",
            previous_response_id="resp_a",
            input=[{"type": "function_call_output", "call_id": "call_wrong", "output": "x"}],
            stream=stream,
        )
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["code"] == "orphan_tool_result"
    assert error["param"] == "input"
    assert "call_wrong" in error["message"]
    assert len(gateway.provider.received) == 2

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["step_count"] == 2
    steps = trace["steps"]
    assert [(i["kind"], i["call_id"]) for i in steps[1]["input_items"]] == [
        ("tool_result", "call_p")
    ]
    assert steps[1]["stop_reason"] == "completed"
    orphans = [v for v in trace["violations"] if v["kind"] == "orphan_tool_result"]
    assert [(v["call_id"], v["enforced"]) for v in orphans] == [("call_wrong", True)]


async def test_unknown_previous_response_is_forwarded(gateway: Gateway) -> None:
    """Calls the gateway never saw (another gateway, a restart) cannot be checked: no refusal."""
    gateway.provider.queue(reply(response([message("ok")], response_id="resp_z")))
    result = await client(gateway).responses.create(
        model="gpt-5",
        previous_response_id="resp_seen_elsewhere",
        input=[{"type": "function_call_output", "call_id": "call_x", "output": "42"}],
    )
    assert result.output_text == "ok"
    trace = (await gateway.traces())[0]
    assert trace["violation_count"] == 0


CUT = response([message("Once upon")], status="incomplete", incomplete_reason="max_output_tokens")
FAILED = response([], status="failed", error={"code": "server_error", "message": "It failed."})
STOPS = [
    (CUT, "length", "max_output_tokens"),
    (FAILED, "error", "server_error"),
    (response([message("Done.")]), "completed", "completed"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("body", "stop", "raw"), STOPS, ids=["length", "failed", "completed"])
async def test_stop_reasons(gateway: Gateway, stream: bool, body: Any, stop: str, raw: str) -> None:
    gateway.provider.queue(streamed(body) if stream else reply(body))
    await create(client(gateway), stream=stream, model="gpt-5", input="Tell me a story.")
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert (step["stop_reason"], step["raw_stop_reason"]) == (stop, raw)
    if stop == "error":
        assert step["error"]["code"] == "server_error"


async def test_stream_without_terminal_event_is_interrupted(gateway: Gateway) -> None:
    body = response([message("Half a sent")])
    gateway.provider.queue(Reply(events=stream_events(body, terminal=False)))
    events = await client(gateway).responses.create(model="gpt-5", input="hi", stream=True)
    async for _ in events:
        pass
    trace = await gateway.trace((await gateway.traces())[0]["id"])
    assert trace["steps"][0]["stop_reason"] == "interrupted"
    assert [v["kind"] for v in trace["violations"]] == ["stream_interrupted"]


async def test_token_budget_clamps_max_output_tokens(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_tokens=100)
    gw.provider.queue(
        reply(response([message("a")], response_id="resp_1", use=usage(50, 30))),
        reply(response([message("b")], response_id="resp_2", use=usage(15, 5))),
    )
    sdk = client(gw, **{"X-Loopwatch-Trace-Id": "budgeted-responses"})
    raw = await sdk.responses.with_raw_response.create(
        model="gpt-5", input="hi", max_output_tokens=500
    )
    assert raw.headers["x-loopwatch-max-tokens-clamped"] == "100"
    assert gw.provider.received[0].json()["max_output_tokens"] == 100
    await gw.flush()
    await asyncio.sleep(0.2)  # settlement runs after the response
    await sdk.responses.create(model="gpt-5", input="hi")
    assert gw.provider.received[1].json()["max_output_tokens"] == 20  # 100 - 80 spent
    await asyncio.sleep(0.2)
    with pytest.raises(openai.RateLimitError) as raised:
        await sdk.responses.create(model="gpt-5", input="hi")
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["code"] == "token_budget_exceeded"
    assert len(gw.provider.received) == 2


async def test_previous_response_id_with_a_trace_header(gateway: Gateway) -> None:
    """The header names the trace; the results still pair against the recorded calls."""
    gateway.provider.queue(
        reply(
            response([function_call("call_h", "get_weather", {"city": "Oslo"})], response_id="r1")
        ),
        reply(response([message("Cold.")], response_id="r2")),
    )
    sdk = client(gateway, **{"X-Loopwatch-Trace-Id": "run-h"})
    await sdk.responses.create(model="gpt-5", input="Oslo?", tools=TOOLS)
    result = await sdk.responses.create(
        model="gpt-5",
        previous_response_id="r1",
        input=[{"type": "function_call_output", "call_id": "call_h", "output": "cold"}],
    )
    assert result.output_text == "Cold."
    trace = await gateway.trace("run-h")
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)
