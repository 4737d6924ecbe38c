"""Reasoning a provider requires back (`reasoning_not_returned`) through the gateway, with the
official SDKs: tool loops that drop it are recorded (observe) or refused before the provider
(enforce); loops that send it back pass; neither the text nor the payloads are stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests import harness
from tests.fakes import anthropic as messages_fake
from tests.fakes.chat import call, completion, streamed
from tests.fakes.provider import Reply
from tests.harness import Gateway
from tests.traffic import scrape, value

provider = harness.provider
make_gateway = harness.make_gateway

pytestmark = pytest.mark.sqlite  # the database file is read back

RULE = "reasoning_not_returned"
REASONING_MARKER = "REASONMARK-2b7e41"  # in every reasoning text below
SIGNATURE_MARKER = "SIGMARK-c90d13"  # in every signature below
ASK = {"role": "user", "content": "Weather in Paris?"}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def stored_bytes(tmp_path: Path) -> bytes:
    """Everything SQLite wrote: the database file and its write-ahead log."""
    return b"".join(p.read_bytes() for p in tmp_path.glob("loopwatch.db*"))


def chat_sdk(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test", max_retries=0))


async def violations(gw: Gateway) -> list[dict[str, Any]]:
    found = await gw.traces(violation=RULE)
    if not found:
        return []
    trace = await gw.trace(found[0]["id"])
    return [v for v in trace["violations"] if v["kind"] == RULE]


# --- DeepSeek: `reasoning_content` beside `tool_calls` (api-docs.deepseek.com/guides/thinking_mode,
# "Tool Calls": it must be sent back in the loop, or the API answers 400).

DEEPSEEK_CALL = call("call_00_ds", "get_weather", {"city": "Paris"})
DEEPSEEK_REASONING = f"The user wants Paris weather. {REASONING_MARKER} I call the tool."


def deepseek_first(stream: bool) -> Reply:
    if stream:
        return streamed(tool_calls=[DEEPSEEK_CALL], reasoning=DEEPSEEK_REASONING)
    extra = {"reasoning_content": DEEPSEEK_REASONING}
    return completion(tool_calls=[DEEPSEEK_CALL], extra_message=extra, model="deepseek-v4-flash")


async def deepseek_loop(gw: Gateway, *, send_back: bool, stream: bool = False) -> None:
    """Ask, run the tool, send its result with the assistant turn echoed (its reasoning
    included or not), as a hand-written agent over the openai SDK does."""
    gw.provider.queue(deepseek_first(stream), completion("Sunny in Paris."))
    client = chat_sdk(gw)
    if stream:
        chunks = await client.chat.completions.create(
            model="deepseek-v4-flash", messages=[ASK], tools=TOOLS, stream=True
        )
        async for _ in chunks:
            pass
    else:
        await client.chat.completions.create(model="deepseek-v4-flash", messages=[ASK], tools=TOOLS)
    echo: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [DEEPSEEK_CALL]}
    if send_back:
        echo["reasoning_content"] = DEEPSEEK_REASONING
    result = {"role": "tool", "tool_call_id": "call_00_ds", "content": "sunny"}
    await client.chat.completions.create(
        model="deepseek-v4-flash", messages=[ASK, echo, result], tools=TOOLS
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_deepseek_loop_dropping_reasoning_is_observed_and_forwarded(
    make_gateway: harness.GatewayFactory, stream: bool, tmp_path: Path
) -> None:
    gw = await make_gateway()
    await deepseek_loop(gw, send_back=False, stream=stream)
    assert len(gw.provider.received) == 2  # observed: forwarded
    (found,) = await violations(gw)
    assert not found["enforced"] and "reasoning_content" in found["detail"]
    trace = await gw.trace(found["trace_id"])
    assert found["step_id"] == trace["steps"][1]["id"]
    reasoning = trace["steps"][0]["output_items"][0]
    assert (reasoning["kind"], reasoning["attrs"]["returns"]) == ("reasoning", "reasoning_content")
    stored = stored_bytes(tmp_path)
    assert b"Sunny in Paris." in stored  # the scan sees what was stored
    assert REASONING_MARKER.encode() not in stored


async def test_deepseek_loop_dropping_reasoning_is_refused_when_enforced(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(reasoning_check="enforce")
    with pytest.raises(openai.BadRequestError) as raised:
        await deepseek_loop(gw, send_back=False)
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["code"] == RULE and body["param"] == "messages"
    assert "reasoning_content" in body["message"]
    assert len(gw.provider.received) == 1  # the provider never saw the broken request
    (found,) = await violations(gw)
    assert found["enforced"]
    trace = await gw.trace(found["trace_id"])
    assert trace["step_count"] == 1 and trace["status"] == "refused"
    metrics = await scrape(gw)
    assert value(metrics, "loopwatch_refused_requests_total", reason="reasoning") == 1
    assert value(metrics, "loopwatch_violations_total", kind=RULE) == 1


async def test_deepseek_loop_sending_reasoning_back_passes(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(reasoning_check="enforce")
    await deepseek_loop(gw, send_back=True)
    assert len(gw.provider.received) == 2
    assert await violations(gw) == []
    assert (await gw.traces())[0]["step_count"] == 2


# --- Gemini's OpenAI compatibility: `extra_content.google.thought_signature` on the first
# call of a turn (ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI compatibility").

THOUGHT_SIGNATURE = f"CiQBjz1rX0{SIGNATURE_MARKER}Tq8=="


def gemini_first() -> Reply:
    signed = {
        **call("function-call-1", "get_weather", {"city": "Paris"}),
        "extra_content": {"google": {"thought_signature": THOUGHT_SIGNATURE}},
    }
    return completion(tool_calls=[signed], model="gemini-3-pro-preview")


@pytest.mark.parametrize("send_back", [False, True], ids=["dropped", "sent back"])
async def test_gemini_thought_signature(
    make_gateway: harness.GatewayFactory, send_back: bool, tmp_path: Path
) -> None:
    gw = await make_gateway()
    gw.provider.queue(gemini_first(), completion("Sunny."))
    client = chat_sdk(gw)
    first = await client.chat.completions.create(
        model="gemini-3-pro-preview", messages=[ASK], tools=TOOLS
    )
    calls = first.choices[0].message.tool_calls or []
    # The SDK keeps the provider's extra field; an agent that rebuilds the call drops it.
    echoed = [c.model_dump(exclude=None if send_back else {"extra_content"}) for c in calls]
    assert ("extra_content" in echoed[0]) is send_back
    messages = [
        ASK,
        {"role": "assistant", "content": None, "tool_calls": echoed},
        {"role": "tool", "tool_call_id": "function-call-1", "content": "sunny"},
    ]
    await client.chat.completions.create(
        model="gemini-3-pro-preview", messages=messages, tools=TOOLS
    )
    found = await violations(gw)
    if send_back:
        assert found == []
    else:
        assert [(v["call_id"], v["enforced"]) for v in found] == [("function-call-1", False)]
        assert "thought_signature" in found[0]["detail"]
    assert SIGNATURE_MARKER.encode() not in stored_bytes(tmp_path)


# --- Anthropic: a tool-use turn's thinking blocks, signature included, must come back.

ANTHROPIC_SIGNATURE = f"EroCCmUIDhgC{SIGNATURE_MARKER}KkCLNWw0dWjXDU=="


def anthropic_sdk(gw: Gateway) -> anthropic.AsyncAnthropic:
    return gw.closing(anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-x", max_retries=0))


def thinking_turn() -> dict[str, Any]:
    return messages_fake.message(
        [
            messages_fake.thinking(f"Paris, then. {REASONING_MARKER}", ANTHROPIC_SIGNATURE),
            messages_fake.tool_use("toolu_paris", "get_weather", {"city": "Paris"}),
        ],
        message_id="msg_01thinking",
    )


async def anthropic_loop(
    sdk: anthropic.AsyncAnthropic,
    next_sdk: anthropic.AsyncAnthropic | None = None,
    *,
    keep_thinking: bool,
    stream: bool,
    between: Callable[[], Awaitable[None]] | None = None,
    then_thinking: dict[str, Any] | None = None,
    **headers: str,
) -> None:
    """Two requests of a thinking agent: the answer's blocks echoed, thinking kept or not;
    the second sent with `next_sdk` (another gateway), after `between`, with thinking set
    to `then_thinking` when given."""
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "extra_headers": headers,
    }
    asked = {"role": "user", "content": "Weather in Paris?"}
    if stream:
        async with sdk.messages.stream(messages=[asked], **request) as events:
            first = await events.get_final_message()
    else:
        first = await sdk.messages.create(messages=[asked], **request)
    blocks = [b.model_dump(exclude_none=True) for b in first.content]
    if not keep_thinking:
        blocks = [b for b in blocks if b["type"] != "thinking"]
    result = {"type": "tool_result", "tool_use_id": "toolu_paris", "content": "sunny"}
    turns = [asked, {"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]
    if between is not None:
        await between()
    if then_thinking is not None:
        request["thinking"] = then_thinking
    await (next_sdk or sdk).messages.create(messages=turns, **request)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_anthropic_loop_dropping_thinking_is_observed(
    make_gateway: harness.GatewayFactory, stream: bool, tmp_path: Path
) -> None:
    gw = await make_gateway()
    first = thinking_turn()
    done = messages_fake.message([messages_fake.text("Sunny.")], message_id="msg_01done")
    make = messages_fake.streamed if stream else messages_fake.reply
    gw.provider.queue(make(first), messages_fake.reply(done))
    await anthropic_loop(anthropic_sdk(gw), keep_thinking=False, stream=stream)
    assert len(gw.provider.received) == 2
    (found,) = await violations(gw)
    assert not found["enforced"] and "thinking" in found["detail"]
    stored = stored_bytes(tmp_path)
    assert b"Sunny." in stored
    for secret in (REASONING_MARKER, SIGNATURE_MARKER):
        assert secret.encode() not in stored


async def test_anthropic_loop_dropping_thinking_is_refused_when_enforced(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(reasoning_check="enforce")
    gw.provider.queue(messages_fake.reply(thinking_turn()))
    with pytest.raises(anthropic.BadRequestError) as raised:
        await anthropic_loop(anthropic_sdk(gw), keep_thinking=False, stream=False)
    body = raised.value.body
    assert isinstance(body, dict) and body["error"]["message"].startswith(f"{RULE}:")
    assert len(gw.provider.received) == 1
    assert [v["enforced"] for v in await violations(gw)] == [True]


async def test_anthropic_loop_turning_thinking_off_owes_none(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(reasoning_check="enforce")
    done = messages_fake.message([messages_fake.text("Sunny.")], message_id="msg_01done")
    gw.provider.queue(messages_fake.reply(thinking_turn()), messages_fake.reply(done))
    off = {"type": "disabled"}
    await anthropic_loop(anthropic_sdk(gw), keep_thinking=False, stream=False, then_thinking=off)
    assert len(gw.provider.received) == 2 and await violations(gw) == []


async def test_anthropic_digests_hold_across_gateways_on_one_store(
    make_gateway: harness.GatewayFactory,
) -> None:
    """A step recorded by one gateway is judged by another from the store: both key their
    digests with the install's secret, and the stored digests survive redaction."""
    first_gw, second_gw = await make_gateway(), await make_gateway()
    done = messages_fake.message([messages_fake.text("Sunny.")], message_id="msg_01done")
    for message_id in ("msg_01kept", "msg_01dropped"):
        turn = {**thinking_turn(), "id": message_id}
        first_gw.provider.queue(messages_fake.reply(turn), messages_fake.reply(done))
    sdks = (anthropic_sdk(first_gw), anthropic_sdk(second_gw))
    for name, keep in (("kept", True), ("dropped", False)):
        await anthropic_loop(
            *sdks,
            keep_thinking=keep,
            stream=False,
            between=first_gw.flush,
            **{"X-Loopwatch-Trace-Id": name},
        )
    assert [v["trace_id"] for v in await violations(second_gw)] == ["dropped"]
