"""Opaque reasoning kept (`keep_opaque_reasoning`): tool loops with signed Anthropic thinking,
redacted thinking and encrypted Responses reasoning, through the gateway with the official
SDKs. Off, no payload is stored; on, cassettes and forks send each back exactly, and no view,
search or exporter shows one."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.sinks.otlp.sink import OtlpSink
from gateway.step import StepRecord
from gateway.ui.mcp_server.answers import Reader, get_trace
from tests.e2e.proxy.test_proxy_unhappy import database_bytes
from tests.e2e.sinks.test_otlp import exported, redacting_of
from tests.e2e.sinks.test_redacted import Seen
from tests.e2e.ui.test_fork import AUTH, TOKEN, fork, messages_answer, responses_answer, unstreamed
from tests.fakes import anthropic as fake_anthropic
from tests.fakes import responses as fake_responses
from tests.fakes.collector import FakeCollector
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

# Payloads as providers send them: base64, here with what a redaction rule would rewrite.
SIGNATURE = "EqQBCkgIBRAB/sk-ant-api03KeptSignatureZ9y8x7w6v5u4t3s2r1q0p9o8n7m6l5k4j3i2h1g0"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXmYvOuO"
ENCRYPTED = "gAAAAABpZ3kQKeptEncrypted-Xq9rT2vL8mN4bC6dF1gH3jK5lP7sR0tU2wY4zA6cE8iO9uQ1"
PAYLOADS = (SIGNATURE, REDACTED, ENCRYPTED)
THOUGHT = "Paris first, then Rome."
WORD = "api03KeptSignatureZ9y8x7w6v5u4t3s2r1q0p9o8n7m6l5k4j3i2h1g0"  # one search word

MESSAGES_TOOLS: Any = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
RESPONSES_TOOLS: Any = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    }
]


async def keeping(make_gateway: GatewayFactory, keep: bool, **more: Any) -> Gateway:
    return await make_gateway(admin_token=TOKEN, keep_opaque_reasoning=keep, **more)


def thinking_block(kind: str) -> dict[str, Any]:
    if kind == "thinking":
        return fake_anthropic.thinking(THOUGHT, signature=SIGNATURE)
    return {"type": "redacted_thinking", "data": REDACTED}


async def messages_loop(gw: Gateway, *, stream: bool, kind: str = "thinking") -> None:
    """Two steps with the anthropic SDK: thinking and a tool use, then the request answering
    it, which carries the thinking block back as the API requires."""
    fake = fake_anthropic
    make = fake.streamed if stream else fake.reply
    first = [thinking_block(kind), fake.tool_use("toolu_1", "get_weather", {"city": "Paris"})]
    gw.provider.queue(
        make(fake.message(first, message_id="msg_1", stop_reason="tool_use")),
        make(fake.message([fake.text("Sunny.")], message_id="msg_2")),
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    sdk = gw.closing(anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-t", max_retries=0))
    for n in (1, 2):
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": messages,
            "tools": MESSAGES_TOOLS,
        }
        if stream:
            async with sdk.messages.stream(**kwargs) as events:
                answer = await events.get_final_message()
        else:
            answer = await sdk.messages.create(**kwargs)
        if n == 1:
            result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
            messages += [
                {"role": "assistant", "content": [b.model_dump() for b in answer.content]},
                {"role": "user", "content": [result]},
            ]


async def responses_loop(gw: Gateway, *, stream: bool) -> None:
    """Two steps with the openai SDK: encrypted reasoning and a function call, then the
    whole input again with both echoed (`store: false`, `include` asks for the payload)."""
    fake = fake_responses
    make = fake.streamed if stream else fake.reply
    first = [
        fake.reasoning([], encrypted=ENCRYPTED, item_id="rs_1"),
        fake.function_call("call_1", "get_weather", {"city": "Paris"}),
    ]
    gw.provider.queue(
        make(fake.response(first, response_id="resp_1")),
        make(fake.response([fake.message("Sunny.", "msg_2")], response_id="resp_2")),
    )
    history: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    sdk = gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-t", max_retries=0))
    for n in (1, 2):
        kwargs: dict[str, Any] = {
            "model": "gpt-5",
            "input": history,
            "tools": RESPONSES_TOOLS,
            "reasoning": {"effort": "low"},
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        if stream:
            async with sdk.responses.stream(**kwargs) as events:
                answer = await events.get_final_response()
        else:
            answer = await sdk.responses.create(**kwargs)
        if n == 1:
            history += [item.model_dump(exclude_none=True) for item in answer.output]
            history.append({"type": "function_call_output", "call_id": "call_1", "output": "sunny"})


def opaque_fields(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Each opaque payload of a body and where it sits."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, field in value.items():
            opaque = key in ("signature", "encrypted_content")
            opaque = opaque or (key == "data" and value.get("type") == "redacted_thinking")
            if opaque and isinstance(field, str):
                found.append((f"{path}.{key}", field))
            else:
                found += opaque_fields(field, f"{path}.{key}")
    elif isinstance(value, list):
        for n, field in enumerate(value):
            found += opaque_fields(field, f"{path}[{n}]")
    return found


async def only_trace(gw: Gateway) -> str:
    await gw.flush()
    [trace] = (await gw.get("/api/traces", headers=AUTH))["traces"]
    return str(trace["id"])


async def cassette_steps(gw: Gateway, trace_id: str) -> list[dict[str, Any]]:
    path = f"{gw.url}/api/traces/{trace_id}/cassette"
    async with aiohttp.ClientSession() as s, s.get(path, headers=AUTH) as r:
        assert r.status == 200, await r.text()
        _, *steps = [json.loads(line) for line in (await r.text()).splitlines()]
    return steps


async def shown(gw: Gateway, trace_id: str) -> str:
    """Everything the read API, the trace page and the trace MCP server show of the trace."""
    api = json.dumps(await gw.get(f"/api/traces/{trace_id}", headers=AUTH))
    async with aiohttp.ClientSession() as s:
        headers = {**AUTH, "Accept": "text/html"}
        async with s.get(f"{gw.url}/traces/{trace_id}", headers=headers) as r:
            assert r.status == 200
            page = await r.text()
    reader = Reader(gw.deps.engine, 300.0, 2.0, lambda: datetime.now(UTC))
    text, structured = await asyncio.to_thread(get_trace, reader, {"trace_id": trace_id})
    return "\n".join((api, page, text, json.dumps(structured)))


@pytest.mark.parametrize("protocol", ["messages", "responses"])
async def test_off_no_payload_is_stored(make_gateway: GatewayFactory, protocol: str) -> None:
    gw = await keeping(make_gateway, False)
    if protocol == "messages":
        await messages_loop(gw, stream=True)
        await only_trace(gw)
        gw.provider.received.clear()
        await messages_loop(gw, stream=False, kind="redacted")
    else:
        await responses_loop(gw, stream=True)
    await gw.flush()
    stored = database_bytes(gw.deps.settings.database_url)
    assert not [p for p in PAYLOADS if p.encode() in stored]
    assert THOUGHT.encode() not in stored


@pytest.mark.parametrize("stream", [False, True])
async def test_a_thinking_loop_goes_back_with_its_signature(
    make_gateway: GatewayFactory, stream: bool
) -> None:
    gw = await keeping(make_gateway, True)
    await messages_loop(gw, stream=stream)
    trace_id = await only_trace(gw)
    sent = [r.json() for r in gw.provider.received]
    assert opaque_fields(sent[1]) == [(".messages[1].content[0].signature", SIGNATURE)]
    steps = await cassette_steps(gw, trace_id)
    rebuilt = [step["request"]["body"] for step in steps]
    assert [opaque_fields(body) for body in rebuilt] == [opaque_fields(body) for body in sent]
    # Readable thinking is never stored: a placeholder stands for it, the rest as sent.
    placeholder = rebuilt[1]["messages"][1]["content"][0]["thinking"]
    assert placeholder != THOUGHT
    sent[1]["messages"][1]["content"][0]["thinking"] = placeholder
    assert rebuilt == sent
    assert THOUGHT not in json.dumps(steps)
    assert SIGNATURE.encode() in database_bytes(gw.deps.settings.database_url)
    assert SIGNATURE not in await shown(gw, trace_id)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_responses_loop_goes_back_with_its_encrypted_reasoning(
    make_gateway: GatewayFactory, stream: bool
) -> None:
    gw = await keeping(make_gateway, True)
    await responses_loop(gw, stream=stream)
    trace_id = await only_trace(gw)
    sent = [r.json() for r in gw.provider.received]
    assert opaque_fields(sent[1]) == [(".input[1].encrypted_content", ENCRYPTED)]
    steps = await cassette_steps(gw, trace_id)
    rebuilt = [step["request"]["body"] for step in steps]
    assert [opaque_fields(body) for body in rebuilt] == [opaque_fields(body) for body in sent]
    assert ENCRYPTED not in await shown(gw, trace_id)


async def test_a_redacted_thinking_loop_goes_back_with_its_data(
    make_gateway: GatewayFactory,
) -> None:
    gw = await keeping(make_gateway, True)
    await messages_loop(gw, stream=True, kind="redacted")
    trace_id = await only_trace(gw)
    sent = [r.json() for r in gw.provider.received]
    steps = await cassette_steps(gw, trace_id)
    assert steps[1]["request"]["body"] == sent[1]  # nothing readable in it: equal as sent
    assert opaque_fields(sent[1]) == [(".messages[1].content[0].data", REDACTED)]
    assert REDACTED not in await shown(gw, trace_id)


async def test_search_does_not_find_a_payload(make_gateway: GatewayFactory) -> None:
    gw = await keeping(make_gateway, True)
    await messages_loop(gw, stream=False)
    await only_trace(gw)
    found = await gw.get(f"/api/traces?q={WORD}", headers=AUTH)
    assert found["traces"] == []
    assert (await gw.get("/api/traces?q=Paris", headers=AUTH))["traces"]  # search works


@pytest.fixture
async def collector(aiohttp_server: Any) -> FakeCollector:
    fake = FakeCollector()
    server = await aiohttp_server(fake.app)
    fake.url = str(server.make_url("")).rstrip("/")  # type: ignore[attr-defined]
    return fake


async def test_exporters_never_get_a_payload(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await keeping(
        make_gateway,
        True,
        otlp_endpoint=collector.url,  # type: ignore[attr-defined]
        otlp_timeout=2,
        otlp_capture_content=True,
    )
    redacting = redacting_of(gw)
    assert {type(e) for e in redacting.exporters} == {OtlpSink}
    seen = Seen()
    redacting.exporters = redacting.exporters.joined(seen)
    await messages_loop(gw, stream=True)
    await responses_loop(gw, stream=False)
    spans = await exported(gw, collector)
    assert spans and not [s for span in spans for s in span.strings() if _any_payload(s)]
    assert len(seen.steps) == 4
    assert not [i for step in seen.steps for i in _items(step) if OPAQUE in i.attrs]
    assert not _any_payload(repr(seen.steps))
    # The store has them: the exporters alone go without.
    await gw.flush()
    stored = database_bytes(gw.deps.settings.database_url)
    assert SIGNATURE.encode() in stored and ENCRYPTED.encode() in stored


def _items(step: StepRecord) -> tuple[Any, ...]:
    return (*step.input_items, *step.output_items)


def _any_payload(text: str) -> bool:
    return any(p in text for p in PAYLOADS)


async def test_a_fork_sends_kept_encrypted_reasoning_back(make_gateway: GatewayFactory) -> None:
    gw = await keeping(make_gateway, True)
    await responses_loop(gw, stream=True)
    original = await only_trace(gw)
    step_2 = gw.provider.received[1].json()
    gw.provider.queue(responses_answer())
    status, made = await fork(gw, original, {"at_step": 2, "model": "gpt-5-mini"})
    assert status == 201, made
    sent = gw.provider.received[-1].json()
    assert sent["model"] == "gpt-5-mini"
    assert opaque_fields(sent) == opaque_fields(step_2) != []
    assert ENCRYPTED not in json.dumps(made)


async def test_a_fork_sends_kept_redacted_thinking_back(make_gateway: GatewayFactory) -> None:
    gw = await keeping(make_gateway, True)
    await messages_loop(gw, stream=False, kind="redacted")
    original = await only_trace(gw)
    step_2 = gw.provider.received[1].json()
    gw.provider.queue(messages_answer())
    status, made = await fork(gw, original, {"at_step": 2, "model": "claude-opus-4-1"})
    assert status == 201, made
    sent = gw.provider.received[-1].json()
    assert unstreamed({**sent, "model": step_2["model"]}) == unstreamed(step_2)
    assert opaque_fields(sent) == [(".messages[1].content[0].data", REDACTED)]


async def test_a_kept_signature_cannot_sign_thinking_text_never_stored(
    make_gateway: GatewayFactory,
) -> None:
    """The provider checks a thinking block's text against its signature: the text is never
    stored, so the block cannot go back as it came, kept signature or not."""
    gw = await keeping(make_gateway, True)
    await messages_loop(gw, stream=True)
    original = await only_trace(gw)
    status, answer = await fork(gw, original, {"at_step": 2, "model": "claude-opus-4-1"})
    assert status == 409, answer
    message = answer["error"]["message"]
    assert "step 2" in message and "signature" in message and "never stores" in message
    assert "not kept" not in message and SIGNATURE not in message
    gw.provider.queue(messages_answer())
    status, made = await fork(gw, original, {"at_step": 2, "params": {"thinking": None}})
    assert status == 201, made
    assert opaque_fields(gw.provider.received[-1].json()) == []
