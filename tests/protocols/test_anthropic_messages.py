"""Anthropic Messages adapter: transcripts through the SSE decoder, adapter and assembler."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import pytest

import gateway.protocols.anthropic.messages as module
from gateway.errors import (
    BadRequest,
    BudgetExceeded,
    GatewayError,
    NotFound,
    PairingViolation,
    Unauthorized,
    UpstreamError,
)
from gateway.items import ItemKind, StopReason
from gateway.opaque import UNKEYED, Digests
from gateway.protocols.anthropic.messages import ADAPTER, AnthropicMessagesAdapter
from gateway.protocols.base import ParsedRequest, ProtocolAdapter
from gateway.stream.assembler import Assembled, Assembler
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    ItemsDelta,
    MetaDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from gateway.stream.sse import SSEDecoder, SSEEvent
from tests.factories import load_fixture, output_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "messages"
# Planted in every thinking text, signature and opaque blob of the fixtures.
MARKER = "LWMARK-7f3a9c"
STREAMS = sorted(path.name for path in FIXTURES.glob("*.sse"))


def events_of(data: bytes, split: int | None = None) -> list[SSEEvent]:
    decoder = SSEDecoder()
    chunks = [data] if split is None else [data[:split], data[split:]]
    events = [event for chunk in chunks for event in decoder.decode(chunk)]
    return events + decoder.flush()


def stream_deltas(name: str, split: int | None = None) -> list[Delta]:
    decoder = ADAPTER.new_event_decoder()
    data = (FIXTURES / name).read_bytes()
    return [delta for event in events_of(data, split) for delta in decoder.decode(event)]


def assemble(deltas: list[Delta]) -> Assembled:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler)


def case(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return loaded


def assert_no_marker(*things: Any) -> None:
    for thing in things:
        assert MARKER not in repr(thing)


def usage_of(result: Assembled) -> dict[str, int | None]:
    return result.usage.to_json()


def usage(
    prompt: int, completion: int, cached: int, creation: int, reasoning: int | None = None
) -> dict[str, int | None]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cached_tokens": cached,
        "reasoning_tokens": reasoning,
        "cache_creation_tokens": creation,
    }


# --- streams -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
def test_every_split_point_gives_the_same_deltas(name: str) -> None:
    whole = stream_deltas(name)
    assert whole
    size = len((FIXTURES / name).read_bytes())
    for split in range(1, size):
        assert stream_deltas(name, split) == whole, f"split at byte {split}"


def test_thinking_text_and_tool_use_stream() -> None:
    deltas = stream_deltas("stream_thinking_text_tool_use.sse")
    result = assemble(deltas)
    assert_no_marker(deltas, [item.to_json() for item in result.output_items])
    reasoning, text, call = result.output_items
    thought = (
        "The user asks for the weather in Zürich. LWMARK-7f3a9c "
        "I have the city, so I call get_weather."
    )
    assert reasoning.kind is ItemKind.REASONING and reasoning.text is None
    assert reasoning.attrs["chars"] == len(thought)
    assert reasoning.attrs["tokens"] == 34
    assert (text.kind, text.text) == (
        ItemKind.ASSISTANT_TEXT,
        "Let me check the weather in Zürich for you 🌤.",
    )
    assert call.kind is ItemKind.TOOL_CALL
    assert (call.call_id, call.tool_name) == ("toolu_01LwWeatherCall000001", "get_weather")
    assert call.arguments == '{"city": "Zürich", "unit": "celsius"}'
    assert not call.attrs.get("incomplete")
    assert (result.stop_reason, result.raw_stop_reason) == (StopReason.TOOL_CALLS, "tool_use")
    # prompt = 12 input + 580 cache read + 20 cache creation
    assert usage_of(result) == usage(612, 121, cached=580, creation=20, reasoning=34)
    assert (result.response_id, result.model) == (
        "msg_01LwThinkTextTool0000001",
        "claude-sonnet-4-6",
    )
    assert result.complete and result.error is None and not result.violations


def test_parallel_tool_use_stream_keeps_input_usage_from_message_start() -> None:
    result = assemble(stream_deltas("stream_parallel_tool_use.sse"))
    text, first, second = result.output_items
    assert text.text == "I'll look up both orders at once."
    assert [(c.call_id, c.tool_name, json.loads(c.arguments or "")) for c in (first, second)] == [
        ("toolu_01LwOrderLookupAAAA01", "lookup_order", {"order_id": "A-1001"}),
        ("toolu_01LwOrderLookupBBBB02", "lookup_order", {"order_id": "B-2002"}),
    ]
    assert result.stop_reason is StopReason.TOOL_CALLS
    # message_delta here reports output_tokens only: input comes from message_start.
    assert usage_of(result) == usage(431, 97, cached=0, creation=0)
    assert result.complete and not result.violations


def test_max_tokens_stream_is_length() -> None:
    result = assemble(stream_deltas("stream_max_tokens.sse"))
    [text] = result.output_items
    assert text.text == "The planets, in order:\n1. Mercury\n2. Venus\n3. Earth\n4"
    assert (result.stop_reason, result.raw_stop_reason) == (StopReason.LENGTH, "max_tokens")
    assert usage_of(result) == usage(17, 24, cached=0, creation=0)
    assert result.response_id == "msg_01LwMaxTokens0000000003"


def test_redacted_thinking_stream_keeps_only_the_fact() -> None:
    deltas = stream_deltas("stream_redacted_thinking.sse")
    result = assemble(deltas)
    assert_no_marker(deltas, [item.to_json() for item in result.output_items])
    reasoning, text = result.output_items
    assert reasoning.kind is ItemKind.REASONING and reasoning.text is None
    assert reasoning.attrs["redacted"] is True
    assert text.text == "Hello! How can I help you today?"
    assert (result.stop_reason, result.raw_stop_reason) == (StopReason.COMPLETED, "end_turn")
    assert usage_of(result) == usage(88, 79, cached=0, creation=0)


def test_error_only_stream() -> None:
    deltas = stream_deltas("stream_error_only.sse")
    assert deltas == [ErrorDelta("Overloaded", "overloaded_error", "overloaded_error")]
    result = assemble(deltas)
    assert result.stop_reason is StopReason.ERROR and not result.complete
    assert result.error == {
        "message": "Overloaded",
        "type": "overloaded_error",
        "code": "overloaded_error",
    }
    assert result.output_items == []


def test_error_after_content_keeps_the_content() -> None:
    result = assemble(stream_deltas("stream_midstream_error.sse"))
    [text] = result.output_items
    assert text.text == "Here is the first part of the answer"
    assert result.stop_reason is StopReason.ERROR and result.raw_stop_reason is None
    assert result.error == {
        "message": "Internal server error",
        "type": "api_error",
        "code": "api_error",
    }
    assert result.response_id == "msg_01LwMidstreamError00006"
    assert result.usage.prompt_tokens == 25


# --- single events ----------------------------------------------------------------------------


def decode(*payloads: dict[str, Any] | str) -> list[Delta]:
    decoder = ADAPTER.new_event_decoder()
    out: list[Delta] = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.extend(decoder.decode(SSEEvent(event=None, data=data)))
    return out


# The values of anthropic.types.StopReason and anthropic.types.beta.BetaStopReason.
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", StopReason.COMPLETED),
        ("stop_sequence", StopReason.COMPLETED),
        ("tool_use", StopReason.TOOL_CALLS),
        ("max_tokens", StopReason.LENGTH),
        ("model_context_window_exceeded", StopReason.LENGTH),
        ("refusal", StopReason.REFUSAL),
        ("pause_turn", StopReason.PAUSED),
        ("compaction", StopReason.PAUSED),
        ("something_new", StopReason.UNKNOWN),
    ],
)
def test_stop_reasons(raw: str, expected: StopReason) -> None:
    deltas = decode({"type": "message_delta", "delta": {"stop_reason": raw}})
    assert deltas == [FinishDelta(expected, raw)]
    body = {"type": "message", "id": "msg_1", "content": [], "stop_reason": raw}
    assert FinishDelta(expected, raw) in ADAPTER.decode_body(body)


def test_ignored_events() -> None:
    assert (
        decode(
            "not json",
            "[1, 2]",
            {"type": "ping"},
            {"type": "some_future_event", "x": 1},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta"}},
            {"type": "content_block_stop", "index": 7},
        )
        == []
    )


def test_event_name_is_used_when_the_payload_has_no_type() -> None:
    decoder = ADAPTER.new_event_decoder()
    assert decoder.decode(SSEEvent(event="message_stop", data="{}")) == [EndDelta()]


def test_initial_block_content_counts() -> None:
    deltas = decode(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "Hi"},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "thinking", "thinking": "abc"},
        },
    )
    assert deltas == [TextDelta("Hi"), ReasoningDelta(chars=3)]


def test_tool_use_without_input_deltas_gets_its_start_input() -> None:
    def start(index: int, **extra: Any) -> dict[str, Any]:
        block = {"type": "tool_use", "id": "t1", "name": "now", **extra}
        return {"type": "content_block_start", "index": index, "content_block": block}

    deltas = decode(
        start(0),
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {"type": "content_block_stop", "index": 0},
        start(1, input={"a": "ü"}),
        {"type": "content_block_stop", "index": 1},
    )
    assert deltas == [
        ToolCallStart(0, "t1", "now"),
        ToolCallArgs(0, "{}"),
        ToolCallEnd(0),
        ToolCallStart(1, "t1", "now"),
        ToolCallArgs(1, '{"a":"ü"}'),
        ToolCallEnd(1),
    ]


def test_a_server_tool_block_is_a_call_the_provider_ran_whole_at_its_stop() -> None:
    deltas = decode(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "x"}'},
        },
        {"type": "content_block_stop", "index": 0},
    )
    (whole,) = deltas
    assert isinstance(whole, ItemsDelta)
    (call,) = whole.items
    assert (call.kind, call.call_id, call.tool_name) == (
        ItemKind.TOOL_CALL,
        "srvtoolu_1",
        "web_search",
    )
    assert call.arguments == '{"query": "x"}'
    assert dict(call.attrs) == {"executed_by": "provider", "tool_type": "web_search"}


def test_usage_is_whole_each_time() -> None:
    deltas = decode(
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 1},
            },
        },
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 9}},
    )
    reports = [delta.usage for delta in deltas if isinstance(delta, UsageDelta)]
    assert [(u.prompt_tokens, u.completion_tokens, u.total_tokens) for u in reports] == [
        (12, 1, 13),
        (12, 9, 21),
    ]
    assert deltas[0] == MetaDelta("m", None)


WRONG_TYPES: tuple[Any, ...] = (None, 1, "x", [], {}, True)


def mangled(value: Any) -> list[Any]:
    """Copies of `value` with one nested value at a time replaced by a wrong type."""
    out: list[Any] = []
    if isinstance(value, dict):
        for key in value:
            for wrong in WRONG_TYPES:
                out.append({**value, key: wrong})
            out.extend({**value, key: inner} for inner in mangled(value[key]))
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            for variant in mangled(inner):
                copied = copy.copy(value)
                copied[position] = variant
                out.append(copied)
    return out


@pytest.mark.parametrize("name", STREAMS)
def test_mangled_events_never_raise(name: str) -> None:
    for event in events_of((FIXTURES / name).read_bytes()):
        for variant in mangled(json.loads(event.data)):
            decoder = ADAPTER.new_event_decoder()
            decoder.decode(SSEEvent(event=event.event, data=json.dumps(variant)))
            ADAPTER.decode_body(variant)


# --- bodies ------------------------------------------------------------------------------------


def test_nonstream_parallel_tool_use() -> None:
    deltas = ADAPTER.decode_body(case("nonstream_parallel_tool_use.json")["response"])
    assert deltas[0] == MetaDelta("msg_01LwNonstreamParallel0007", "claude-sonnet-4-20250514")
    assert deltas[-1] == EndDelta()
    result = assemble(deltas)
    text, first, second = result.output_items
    assert text.text == "I'll look up both orders at once."
    assert (first.call_id, first.tool_name, first.arguments) == (
        "toolu_01LwNsLookupAAAAAAAAA1",
        "lookup_order",
        '{"order_id":"A-1001"}',
    )
    assert second.arguments == '{"order_id":"B-2002","note":"größer"}'
    assert result.stop_reason is StopReason.TOOL_CALLS and result.complete
    assert usage_of(result) == usage(431, 97, cached=0, creation=0)


def test_nonstream_usage_with_cache_read_and_creation() -> None:
    result = assemble(
        ADAPTER.decode_body(case("nonstream_usage_cache_read_and_creation.json")["response"])
    )
    # prompt = 5 input + 2048 cache read + 310 cache creation
    assert usage_of(result) == usage(2363, 41, cached=2048, creation=310)
    assert result.usage.total() == 2404
    assert result.stop_reason is StopReason.COMPLETED


def test_tool_result_roundtrip_request() -> None:
    fixture = case("nonstream_tool_result_roundtrip.json")
    parsed = ADAPTER.parse_request(fixture["request"]["body"])
    assert_no_marker([item.to_json() for item in parsed.items])
    assert [(item.kind, item.role, item.attrs.get("message_index")) for item in parsed.items] == [
        (ItemKind.INSTRUCTION, "system", None),
        (ItemKind.USER, "user", 0),
        (ItemKind.REASONING, "assistant", 1),
        (ItemKind.REASONING, "assistant", 1),
        (ItemKind.ASSISTANT_TEXT, "assistant", 1),
        (ItemKind.TOOL_CALL, "assistant", 1),
        (ItemKind.TOOL_CALL, "assistant", 1),
        (ItemKind.TOOL_RESULT, "user", 2),
        (ItemKind.TOOL_RESULT, "user", 2),
        (ItemKind.OTHER, "user", 2),
        (ItemKind.OTHER, "user", 2),
        (ItemKind.USER, "user", 2),
        (ItemKind.TOOL_CALL, "assistant", 3),
        (ItemKind.TOOL_RESULT, "assistant", 3),
        (ItemKind.ASSISTANT_TEXT, "assistant", 3),
        (ItemKind.USER, "user", 4),
    ]
    items = parsed.items
    assert items[0].text == "You are a support agent.\nUse parallel tool calls."
    # Of the signature and the redacted data, only keyed digests: the API wants them back.
    assert items[2].attrs == {
        "message_index": 1,
        "chars": len("Two orders, LWMARK-7f3a9c, so two calls."),
        "returns": "thinking",
        "digests": [UNKEYED.of("EuYBCkQIBxgCLWMARK-7f3a9cAk0==")],
    }
    assert items[2].text is None
    assert items[3].attrs == {
        "message_index": 1,
        "redacted": True,
        "returns": "thinking",
        "digests": [UNKEYED.of("EqkECkYIBxgCKkA8LWMARK-7f3a9cAZ4noDfV5VcOJe==")],
    }
    assert (items[6].call_id, items[6].tool_name, items[6].arguments) == (
        "toolu_01LwNsLookupBBBBBBBBB2",
        "lookup_order",
        '{"order_id":"B-2002","note":"größer"}',
    )
    ok, failed = items[7], items[8]
    assert (ok.call_id, ok.text, ok.is_error) == (
        "toolu_01LwNsLookupAAAAAAAAA1",
        "Shipped on 3 March.",
        False,
    )
    assert (failed.call_id, failed.is_error) == ("toolu_01LwNsLookupBBBBBBBBB2", True)
    assert failed.text == "Order service unavailable.\nRetry later."
    assert failed.attrs == {"message_index": 2, "images": 1}
    assert items[9].attrs == {
        "message_index": 2,
        "type": "image",
        "media_type": "image/jpeg",
        "source": "base64",
    }
    assert (
        items[10].attrs["type"] == "document" and items[10].attrs["media_type"] == "application/pdf"
    )
    # The web search the provider ran: a call and its result, the encrypted content not kept.
    search, found = items[12], items[13]
    assert (search.call_id, search.tool_name, search.arguments) == (
        "srvtoolu_01LwSearch000000001",
        "web_search",
        '{"query":"carrier delays March"}',
    )
    assert search.attrs == {
        "message_index": 3,
        "executed_by": "provider",
        "tool_type": "web_search",
    }
    assert (found.call_id, found.text, found.is_error) == (
        "srvtoolu_01LwSearch000000001",
        "Delays https://example.com/delays",
        False,
    )
    assert found.attrs == {
        "message_index": 3,
        "executed_by": "provider",
        "tool_type": "web_search",
        "results": 1,
    }
    assert (parsed.model, parsed.stream, parsed.max_output_tokens) == (
        "claude-sonnet-4-0",
        False,
        16000,
    )

    result = assemble(ADAPTER.decode_body(fixture["response"]))
    assert [item.kind for item in result.output_items] == [ItemKind.ASSISTANT_TEXT]
    assert result.stop_reason is StopReason.COMPLETED
    assert usage_of(result) == usage(702, 31, cached=0, creation=0)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("error_401_authentication.json", ("invalid x-api-key", "authentication_error")),
        ("error_529_overloaded.json", ("Overloaded", "overloaded_error")),
    ],
)
def test_error_bodies(name: str, expected: tuple[str, str]) -> None:
    body = case(name)["response"]
    message, kind = expected
    assert ADAPTER.decode_error(body) == {"message": message, "type": kind, "code": kind}
    deltas = ADAPTER.decode_body(body)
    assert deltas == [ErrorDelta(message, kind, kind), EndDelta()]
    assert assemble(deltas).stop_reason is StopReason.ERROR


def test_decode_error_of_other_bodies() -> None:
    assert ADAPTER.decode_error({"type": "message"}) is None
    assert ADAPTER.decode_error("Bad gateway") is None
    assert ADAPTER.decode_error({"error": {}}) == {
        "message": "unknown error",
        "type": None,
        "code": None,
    }
    assert ADAPTER.decode_body("Bad gateway") == []
    assert ADAPTER.decode_body({"error": {"message": "upstream timed out"}}) == [
        ErrorDelta("upstream timed out", None, None),
        EndDelta(),
    ]


# --- requests ----------------------------------------------------------------------------------


def test_plain_request() -> None:
    parsed = ADAPTER.parse_request(
        {
            "model": "claude-sonnet-4-0",
            "max_tokens": 50,
            "stream": True,
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
            ],
        }
    )
    assert [(i.kind, i.role, i.text) for i in parsed.items] == [
        (ItemKind.INSTRUCTION, "system", "Be brief."),
        (ItemKind.USER, "user", "Hi"),
        (ItemKind.ASSISTANT_TEXT, "assistant", "Hello"),
    ]
    assert (parsed.model, parsed.stream, parsed.max_output_tokens) == (
        "claude-sonnet-4-0",
        True,
        50,
    )


def test_tool_use_arguments_are_compact_and_keep_unicode() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "naïve", "n": [1, 2]}}
    parsed = ADAPTER.parse_request({"messages": [{"role": "assistant", "content": [block]}]})
    assert parsed.items[0].arguments == '{"q":"naïve","n":[1,2]}'


def test_tool_result_without_content_and_with_other_blocks() -> None:
    blocks = [
        {"type": "tool_result", "tool_use_id": "toolu_1"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": [{"type": "search_result", "source": "s"}],
        },
    ]
    empty, other = ADAPTER.parse_request({"messages": [{"role": "user", "content": blocks}]}).items
    assert (empty.text, empty.is_error, empty.attrs) == (None, False, {"message_index": 0})
    assert (other.text, other.attrs) == (None, {"message_index": 0, "omitted": ["search_result"]})


@pytest.mark.parametrize("body", [[], "text", 7])
def test_a_body_that_is_not_an_object_is_refused(body: Any) -> None:
    with pytest.raises(BadRequest) as raised:
        ADAPTER.parse_request(body)
    assert raised.value.param == "body"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [{"field": "messages", "shape": "null"}]),
        ({"messages": {"role": "user"}}, [{"field": "messages", "shape": "object"}]),
        ({"messages": ["hi"]}, [{"message_index": 0, "shape": "string"}]),
        ({"messages": [{"role": "user"}]}, [{"message_index": 0, "shape": "null"}]),
        ({"messages": [{"role": "user", "content": 5}]}, [{"message_index": 0, "shape": "number"}]),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": ["x"]}]},
            [{"message_index": 1, "shape": "string"}],
        ),
        (
            {"messages": [{"role": "narrator", "content": "x"}]},
            [{"message_index": 0, "role": "narrator"}],
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "hologram", "data": "x"}]}]},
            [{"message_index": 0, "type": "hologram"}],
        ),
        ({"messages": [], "system": 5}, [{"shape": "number"}]),
        ({"messages": [], "system": ["x"]}, []),
    ],
)
def test_shapes_it_cannot_type_are_other_items_never_errors(
    body: dict[str, Any], expected: list[dict[str, Any]]
) -> None:
    """Forward compatible: the provider judges what the gateway does not know."""
    items = ADAPTER.parse_request(body).items
    assert [item.attrs for item in items if item.kind is ItemKind.OTHER] == expected


def test_system_turns_inside_messages_are_instructions() -> None:
    """Claude Code's per-turn control (beta `per-turn-control-2026-07-01`)."""
    items = ADAPTER.parse_request(
        {
            "system": "You are a coding agent.",
            "messages": [
                {"role": "user", "content": "List the files."},
                {"role": "system", "content": "Stay in the project directory."},
                {
                    "role": "system",
                    "content": [
                        {"type": "text", "text": "Be brief."},
                        {"type": "text", "text": "Use tools.", "cache_control": {"type": "x"}},
                    ],
                },
            ],
        }
    ).items
    assert [(i.kind, i.role, i.text, i.attrs) for i in items] == [
        (ItemKind.INSTRUCTION, "system", "You are a coding agent.", {}),
        (ItemKind.USER, "user", "List the files.", {"message_index": 0}),
        (ItemKind.INSTRUCTION, "system", "Stay in the project directory.", {"message_index": 1}),
        (ItemKind.INSTRUCTION, "system", "Be brief.\nUse tools.", {"message_index": 2}),
    ]


# --- preparing bodies and rendering errors -----------------------------------------------------


def prepare(body: dict[str, Any], max_tokens: int | None) -> tuple[dict[str, Any], int | None]:
    prepared = ADAPTER.prepare_body(body, ADAPTER.parse_request(body), max_tokens=max_tokens)
    assert not prepared.hide_usage_event
    return prepared.body, prepared.clamped_max_tokens


def test_prepare_body_clamps_only_a_larger_limit() -> None:
    body = {"model": "m", "max_tokens": 1000, "stream": True, "messages": []}
    clamped, reported = prepare(body, 300)
    assert (clamped["max_tokens"], reported) == (300, 300)
    assert body["max_tokens"] == 1000 and "stream_options" not in clamped
    for budget in (None, 1000, 5000):
        same, reported = prepare(body, budget)
        assert same is body and reported is None
    # Without the required max_tokens the provider rejects the request; we add nothing.
    unlimited = {"model": "m", "messages": []}
    assert prepare(unlimited, 300) == (unlimited, None)


def _valid_thinking(body: dict[str, Any]) -> bool:
    """What the API checks: a budget of at least 1024, below max_tokens."""
    budget = body["thinking"]["budget_tokens"]
    return bool(1024 <= budget < body["max_tokens"])


def test_prepare_body_keeps_an_extended_thinking_budget_valid() -> None:
    body = load_fixture("messages", "request_thinking_budget.json")  # max 4096, budget 1024
    # Room for the thinking budget: only max_tokens changes.
    clamped, reported = prepare(body, 2000)
    assert (clamped["max_tokens"], reported) == (2000, 2000)
    assert clamped["thinking"] is body["thinking"]
    # Less than the budget remains: the limit stops just above the API's floor.
    for remaining in (1024, 500, 1):
        clamped, reported = prepare(body, remaining)
        assert (clamped["max_tokens"], reported) == (1025, 1025)
        assert clamped["thinking"] == {"type": "enabled", "budget_tokens": 1024}
        assert _valid_thinking(clamped)
    assert body["max_tokens"] == 4096 and body["thinking"]["budget_tokens"] == 1024
    # A large budget shrinks with the limit, in proportion, leaving room for the answer.
    big = {**body, "max_tokens": 16000, "thinking": {"type": "enabled", "budget_tokens": 10000}}
    clamped, reported = prepare(big, 4000)
    assert (clamped["max_tokens"], reported) == (4000, 4000)
    assert clamped["thinking"] == {"type": "enabled", "budget_tokens": 2500}
    assert _valid_thinking(clamped) and big["thinking"]["budget_tokens"] == 10000
    # Already at or under the floor: nothing to lower.
    small = {**body, "max_tokens": 1025}
    assert prepare(small, 300) == (small, None)
    # Thinking off or adaptive: the plain clamp.
    for thinking in ({"type": "disabled"}, {"type": "adaptive"}):
        plain, reported = prepare({**body, "thinking": thinking}, 300)
        assert (plain["max_tokens"], plain["thinking"], reported) == (300, thinking, 300)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (BadRequest("bad", param="messages"), "invalid_request_error"),
        (
            PairingViolation(
                "no result", rule="missing_tool_result", call_id="t", param="messages"
            ),
            "invalid_request_error",
        ),
        (Unauthorized("who"), "authentication_error"),
        (NotFound("where"), "not_found_error"),
        (BudgetExceeded("too many steps", code="step_budget_exceeded"), "rate_limit_error"),
        (UpstreamError("down"), "api_error"),
        (GatewayError("oops"), "api_error"),
    ],
)
def test_error_body(error: GatewayError, kind: str) -> None:
    body = ADAPTER.error_body(error)
    assert body == {
        "type": "error",
        "error": {"type": kind, "message": f"{error.code}: {error.message}"},
    }
    assert ADAPTER.decode_error(body) == {
        "message": f"{error.code}: {error.message}",
        "type": kind,
        "code": kind,
    }


def test_budget_error_message_leads_with_our_code() -> None:
    body = ADAPTER.error_body(BudgetExceeded("3 of 3 steps used", code="step_budget_exceeded"))
    assert body["error"]["message"] == "step_budget_exceeded: 3 of 3 steps used"


# --- shape -------------------------------------------------------------------------------------


def test_adapter_shape() -> None:
    adapter: ProtocolAdapter = AnthropicMessagesAdapter()
    assert adapter.name == "messages" and isinstance(ADAPTER, AnthropicMessagesAdapter)
    assert adapter.is_injected_usage_event(SSEEvent(event="message_delta", data="{}")) is False
    assert isinstance(adapter.parse_request({"messages": []}), ParsedRequest)


def test_no_other_protocol_is_imported() -> None:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    protocols = {name for name in imported if name and name.startswith("gateway.protocols")}
    assert protocols <= {
        "gateway.protocols.base",
        "gateway.protocols.anthropic.blocks",
        "gateway.protocols.anthropic.events",
        "gateway.protocols.json_values",
        "gateway.protocols.request_body",
    }


def test_a_compaction_block_is_no_held_state() -> None:
    """anthropic beta `BetaCompactionBlockParam` sent back: a result answers the assistant
    turn just before it, which the request holds, so pairing stays whole."""
    compaction = {"type": "compaction", "content": "Summary.", "encrypted_content": "opaque"}
    messages = [
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": [compaction]},
        {"role": "user", "content": "And then?"},
    ]
    body = {"model": "claude-opus-4-6", "max_tokens": 64, "messages": messages}
    parsed = ADAPTER.parse_request(body)
    assert not parsed.held_state
    assert [i.attrs.get("type") for i in parsed.items if i.kind is ItemKind.OTHER] == ["compaction"]


# --- what must come back in a tool loop ---------------------------------------------------------

STREAMED_SIGNATURE = "EroCCmUIDhgCKkCLWMARK-7f3a9cNWw0dWjXDUtFhxyU7T1jL1I74woU7bJADq7xTdoI1tp=="


def test_a_thinking_signature_is_recorded_as_its_keyed_digest_only() -> None:
    deltas = stream_deltas("stream_thinking_text_tool_use.sse")
    reasoning = assemble(deltas).output_items[0]
    assert reasoning.attrs["returns"] == "thinking"
    assert reasoning.attrs["digests"] == [UNKEYED.of(STREAMED_SIGNATURE)]
    assert_no_marker(deltas, reasoning.to_json())
    # Keyed: another install's adapter records another digest of the same signature.
    other = ADAPTER.keyed(Digests(b"another install")).new_event_decoder()
    data = (FIXTURES / "stream_thinking_text_tool_use.sse").read_bytes()
    keyed = assemble([d for e in events_of(data) for d in other.decode(e)]).output_items[0]
    assert keyed.attrs["digests"] != reasoning.attrs["digests"]


def test_redacted_thinking_data_is_owed_back_as_a_digest() -> None:
    reasoning = assemble(stream_deltas("stream_redacted_thinking.sse")).output_items[0]
    assert reasoning.attrs["returns"] == "thinking" and len(reasoning.attrs["digests"]) == 1


def test_the_answer_and_its_echo_carry_the_same_digests() -> None:
    """What a body records is what the same blocks echoed in a request record: the check
    compares the two."""
    blocks = case("nonstream_tool_result_roundtrip.json")["request"]["body"]["messages"][1]
    answer = {
        "id": "msg_01LwEcho",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": blocks["content"],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }
    (reasoning, *_) = assemble(ADAPTER.decode_body(answer)).output_items
    echoed = ADAPTER.parse_request({"messages": [blocks]}).items
    assert reasoning.attrs["digests"] == [
        digest for item in echoed for digest in item.attrs.get("digests", ())
    ]
    assert reasoning.attrs["redacted"] is True  # both blocks, in one reasoning item


@pytest.mark.parametrize(
    "block",
    [
        {"type": "thinking", "thinking": "no signature"},
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "thinking", "thinking": "x", "signature": 42},
        {"type": "redacted_thinking"},
    ],
)
def test_thinking_without_a_payload_owes_nothing(block: dict[str, Any]) -> None:
    message = {"role": "assistant", "content": [block]}
    (item,) = ADAPTER.parse_request({"messages": [message]}).items
    assert "returns" not in item.attrs and "digests" not in item.attrs
    answer = {"content": [block], "stop_reason": "end_turn"}
    assert "returns" not in assemble(ADAPTER.decode_body(answer)).output_items[0].attrs


@pytest.mark.parametrize(
    ("thinking", "off"),
    [
        ({"type": "disabled"}, True),
        ({"type": "enabled", "budget_tokens": 1024}, False),
        ({"type": "adaptive"}, False),
        (None, False),  # some models think by default
        ("disabled", False),  # not the API's shape: the provider judges it
    ],
)
def test_a_request_turning_thinking_off_owes_none_back(thinking: Any, off: bool) -> None:
    body: dict[str, Any] = {"messages": []}
    if thinking is not None:
        body["thinking"] = thinking
    assert ADAPTER.parse_request(body).reasoning_off is off
