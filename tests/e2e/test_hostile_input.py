"""Hostile input through the whole gateway: forwarded and recorded, never a 500 or a lost step;
a body that is not JSON in UTF-8 is a 400 in the client's protocol."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from tests.fakes import anthropic, responses
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


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
REPLIES = {
    "chat": lambda: completion("ok"),
    "responses": lambda: responses.reply(responses.response([responses.message("ok")])),
    "messages": lambda: anthropic.reply(anthropic.message([anthropic.text("ok")])),
}
DEEP_PARAM = b"[" * 600 + b"]" * 600  # past orjson's 255 levels, within the standard library's


async def post_raw(gw: Gateway, protocol: str, body: bytes) -> tuple[int, Any, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            gw.url + PATHS[protocol], data=body, headers={"Content-Type": "application/json"}
        ) as r,
    ):
        return r.status, r.headers, await r.json(content_type=None)


def body_of(protocol: str, content: bytes, extra: bytes = b"") -> bytes:
    """A one-turn request of the protocol whose text is `content`, as raw bytes."""
    field = b"input" if protocol == "responses" else b"messages"
    turn = b'[{"role": "user", "content": "' + content + b'"}]'
    return b'{"model": "m", "max_tokens": 64, "' + field + b'": ' + turn + extra + b"}"


@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize(
    ("content", "extra", "reason"),
    [
        (b"caf\xe9", b"", "utf-8"),  # Latin-1, not UTF-8
        (b"half \xed\xa0\x80 a pair", b"", "utf-8"),  # a surrogate, encoded
        (b"half \\ud83d a pair", b"", "lone surrogate"),
        (b"ok", b', "user": "\\udc00"', "lone surrogate"),  # beside the history
    ],
    ids=["latin1", "encoded-surrogate", "escaped-surrogate", "surrogate-in-a-field"],
)
async def test_a_body_that_is_not_unicode_json_is_a_400_in_the_clients_protocol(
    gateway: Gateway, protocol: str, content: bytes, extra: bytes, reason: str
) -> None:
    status, headers, answer = await post_raw(gateway, protocol, body_of(protocol, content, extra))
    assert status == 400
    if protocol == "messages":  # Anthropic's shape: the SDKs show its type and message
        assert answer["type"] == "error"
    else:
        assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["type"] == "invalid_request_error"
    assert "not valid JSON" in answer["error"]["message"]
    assert reason in answer["error"]["message"]
    assert gateway.provider.received == []
    trace = await gateway.trace(headers["X-Loopwatch-Trace-Id"])
    assert trace["status"] == "refused"
    assert [v["kind"] for v in trace["violations"]] == ["invalid_request"]


@pytest.mark.parametrize("protocol", sorted(PATHS))
async def test_values_json_allows_are_forwarded_and_recorded(
    gateway: Gateway, protocol: str
) -> None:
    """Numbers past 64 bits or past a double, NaN, nesting deeper than orjson writes: the
    provider judges them, and the step is stored all the same."""
    gateway.provider.queue(REPLIES[protocol]())
    extra = (
        b', "seed": 123456789012345678901234567890, "top_p": NaN, "temperature": 1e999,'
        b' "metadata": {"deep": ' + DEEP_PARAM + b"}"
    )
    body = body_of(protocol, b"hello", extra)
    status, headers, _ = await post_raw(gateway, protocol, body)
    assert status == 200
    assert gateway.provider.received[0].body == body  # the client's bytes, unchanged
    trace = await gateway.trace(headers["X-Loopwatch-Trace-Id"])
    (step,) = trace["steps"]
    assert [i["text"] for i in step["input_items"] if i["kind"] == "user"] == ["hello"]
