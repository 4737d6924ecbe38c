"""Hostile input through the whole gateway: forwarded and recorded, never a 500 or a lost step."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.fakes.chat import call, completion, stream_chunks
from tests.fakes.provider import Reply
from tests.harness import (  # noqa: F401
    Gateway,
    gateway,
    make_gateway,
    provider,
)

pytestmark = pytest.mark.sqlite

DEEP = "[" * 100_000 + "]" * 100_000
# Far past what a recursive parser can read, small enough to stream in a few thousand events.
DEEP_STREAMED = "[" * 5_000 + "]" * 5_000


def sdk(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test", max_retries=0))


async def test_deeply_nested_arguments_in_a_history_are_forwarded_and_recorded(
    gateway: Gateway,
) -> None:
    gateway.provider.queue(completion("ok"))
    history: Any = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_deep",
                    "type": "function",
                    "function": {"name": "f", "arguments": DEEP},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_deep", "content": DEEP},
    ]
    answer = await sdk(gateway).chat.completions.create(model="gpt-4o", messages=history)
    assert answer.choices[0].message.content == "ok"
    assert len(gateway.provider.received) == 1
    trace = (await gateway.traces())[0]
    step = (await gateway.trace(trace["id"]))["steps"][0]
    assert [i["kind"] for i in step["input_items"]] == ["user", "tool_call", "tool_result"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_deeply_nested_arguments_from_a_provider_are_recorded_and_flagged(
    gateway: Gateway, stream: bool
) -> None:
    deep = DEEP_STREAMED if stream else DEEP
    calls = [call("call_deep", "f", deep)]
    reply = (
        Reply(events=stream_chunks(None, tool_calls=calls))
        if stream
        else completion(tool_calls=calls)
    )
    gateway.provider.queue(reply)
    body: Any = {"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}]}
    if stream:
        chunks = await sdk(gateway).chat.completions.create(**body, stream=True)
        arguments = "".join(
            [
                c.choices[0].delta.tool_calls[0].function.arguments or ""
                async for c in chunks
                if c.choices and c.choices[0].delta.tool_calls
            ]
        )
    else:
        answer = await sdk(gateway).chat.completions.create(**body)
        arguments = answer.choices[0].message.tool_calls[0].function.arguments  # type: ignore[union-attr]
    assert arguments == deep  # the client got the provider's bytes
    trace = await gateway.trace((await gateway.traces())[0]["id"])
    step = trace["steps"][0]
    assert step["stop_reason"] == "tool_calls"
    assert [i["kind"] for i in step["output_items"]] == ["tool_call"]
    flagged = [v for v in trace["violations"] if v["kind"] == "invalid_tool_arguments"]
    assert flagged and "nested too deeply" in flagged[0]["detail"]
