"""OpenAI Responses adapter: request items, stream events and bodies, through the assembler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import BadRequest, BudgetExceeded
from gateway.items import Item, ItemKind, StopReason
from gateway.protocols.base import ParsedRequest
from gateway.protocols.openai_responses import ADAPTER, OpenAIResponsesAdapter
from gateway.stream.assembler import Assembled, Assembler
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    MetaDelta,
    ReasoningDelta,
    ReasoningSummaryDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from gateway.stream.sse import SSEDecoder, SSEEvent
from tests.factories import output_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "responses"
# Planted in the fixtures' encrypted_content and raw reasoning text: it must never surface.
MARKER = "LWMARKER-7f3a9c-raw-chain-of-thought"
STREAMS = sorted(path.name for path in FIXTURES.glob("*.sse"))


def _raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _json(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def _events(*chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.decode(chunk)]
    return events + decoder.flush()


def _decode(*chunks: bytes) -> list[Delta]:
    decoder = ADAPTER.new_event_decoder()
    return [delta for event in _events(*chunks) for delta in decoder.decode(event)]


def _assemble(deltas: list[Delta]) -> Assembled:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler)


def _event(data: Any, event: str | None = None) -> SSEEvent:
    text = data if isinstance(data, str) else json.dumps(data)
    return SSEEvent(event=event, data=text)


def _assert_no_marker(deltas: list[Delta], items: list[Item]) -> None:
    assert MARKER not in repr(deltas)
    assert MARKER not in json.dumps([item.to_json() for item in items])


def _kinds(items: list[Item]) -> list[ItemKind]:
    return [item.kind for item in items]


# --- streams ---------------------------------------------------------------------------


def test_parallel_function_calls_stream() -> None:
    deltas = _decode(_raw("stream_parallel_function_calls.sse"))
    starts = [d for d in deltas if isinstance(d, ToolCallStart)]
    assert starts == [
        ToolCallStart(
            0,
            "call_Wq3nT8rLk2Pz9vYb1Xc4Md7e",
            "get_weather",
            item_id="fc_68f1a2b3c4d5e6f7aaaa000000000001",
        ),
        ToolCallStart(
            1,
            "call_Hj6sF0aGm5Ue2Ri8Oy3Tn1Kw",
            "get_weather",
            item_id="fc_68f1a2b3c4d5e6f7aaaa000000000002",
        ),
    ]
    first_args = [d.fragment for d in deltas if isinstance(d, ToolCallArgs) and d.index == 0]
    assert first_args == ['{"ci', 'ty":', ' "Par', 'is", "un', 'it": "c"}']
    ends = [d for d in deltas if isinstance(d, ToolCallEnd)]
    assert [(d.index, d.arguments) for d in ends] == [
        (0, '{"city": "Paris", "unit": "c"}'),
        (1, '{"city": "Oslo", "unit": "c"}'),
    ]
    assert deltas[-1] == EndDelta()

    result = _assemble(deltas)
    assert result.complete and result.violations == []
    assert result.stop_reason is StopReason.TOOL_CALLS
    assert result.raw_stop_reason == "completed"
    assert result.response_id == "resp_68f1a2b3c4d5e6f70011223344556677"
    assert result.model == "gpt-4o-2024-08-06"
    calls = [(i.call_id, i.tool_name, json.loads(i.arguments or "")) for i in result.output_items]
    assert calls == [
        ("call_Wq3nT8rLk2Pz9vYb1Xc4Md7e", "get_weather", {"city": "Paris", "unit": "c"}),
        ("call_Hj6sF0aGm5Ue2Ri8Oy3Tn1Kw", "get_weather", {"city": "Oslo", "unit": "c"}),
    ]
    usage = result.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (1102, 48, 1150)
    assert (usage.cached_tokens, usage.reasoning_tokens) == (1024, 0)


def test_reasoning_summary_and_encrypted_content_stream() -> None:
    deltas = _decode(_raw("stream_reasoning_summary_encrypted.sse"))
    reasoning = [d for d in deltas if isinstance(d, ReasoningDelta)]
    assert reasoning[0] == ReasoningDelta(chars=0, item_id="rs_68f1b0c0ffee0011aaaa0000000000aa")
    assert ReasoningDelta(chars=0, attrs={"encrypted": True}) in reasoning
    assert sum(d.chars for d in reasoning) == len("thinking: " + MARKER)
    summary = "".join(d.text for d in deltas if isinstance(d, ReasoningSummaryDelta))
    assert summary == (
        "**Checking the units**\n\nThe user wants Celsius."
        "\n\n**Answering**\n\nI will give one number."
    )

    result = _assemble(deltas)
    _assert_no_marker(deltas, result.output_items)
    assert _kinds(result.output_items) == [ItemKind.REASONING, ItemKind.ASSISTANT_TEXT]
    thought, answer = result.output_items
    assert thought.text == summary
    assert thought.attrs["encrypted"] is True and thought.attrs["tokens"] == 384
    assert answer.text == "It is 21 °C in Paris right now."
    assert result.stop_reason is StopReason.COMPLETED and result.raw_stop_reason == "completed"
    assert (result.usage.completion_tokens, result.usage.reasoning_tokens) == (410, 384)


def test_incomplete_max_output_tokens_is_length() -> None:
    result = _assemble(_decode(_raw("stream_incomplete_max_output_tokens.sse")))
    assert result.complete
    assert result.stop_reason is StopReason.LENGTH
    assert result.raw_stop_reason == "max_output_tokens"
    assert _kinds(result.output_items) == [ItemKind.ASSISTANT_TEXT]
    assert result.output_items[0].text == (
        "The planets, in order: Mercury, Venus, Earth, Mars, Jupiter,"
    )
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (12, 16)


def test_error_event_then_failed_response() -> None:
    deltas = _decode(_raw("stream_error_insufficient_quota.sse"))
    errors = [d for d in deltas if isinstance(d, ErrorDelta)]
    assert len(errors) == 1  # response.failed repeats the error; it is reported once
    assert (errors[0].type, errors[0].code) == ("insufficient_quota", "insufficient_quota")
    finish = [d for d in deltas if isinstance(d, FinishDelta)]
    assert finish == [FinishDelta(StopReason.ERROR, "insufficient_quota")]

    result = _assemble(deltas)
    assert result.stop_reason is StopReason.ERROR
    assert result.raw_stop_reason == "insufficient_quota"
    assert result.error is not None and result.error["code"] == "insufficient_quota"
    assert result.error["message"].startswith("You exceeded your current quota")
    assert result.usage.prompt_tokens is None and result.output_items == []
    assert result.response_id == "resp_68f1d00d00d00d00d00d00d00d00d00d"


def test_failed_response_without_error_event_reports_its_error() -> None:
    failed = {
        "id": "resp_x",
        "status": "failed",
        "error": {"code": "server_error", "message": "boom"},
    }
    deltas = ADAPTER.new_event_decoder().decode(
        _event({"type": "response.failed", "response": failed})
    )
    assert ErrorDelta("boom", None, "server_error") in deltas
    assert deltas[-2:] == [FinishDelta(StopReason.ERROR, "server_error"), EndDelta()]


# Statuses from openai.types.responses.ResponseStatus, incomplete reasons from
# Response.IncompleteDetails.reason; the terminal events from ResponseFailedEvent and
# ResponseIncompleteEvent (the SDK has no `response.cancelled` event: a cancelled response
# is read from its body).
@pytest.mark.parametrize(
    ("response", "event", "expected"),
    [
        ({"status": "cancelled"}, None, FinishDelta(StopReason.CANCELLED, "cancelled")),
        # A background response before its end (ResponseStatus: queued, in_progress).
        ({"status": "queued"}, None, FinishDelta(StopReason.UNKNOWN, "queued", pending=True)),
        (
            {"status": "in_progress"},
            None,
            FinishDelta(StopReason.UNKNOWN, "in_progress", pending=True),
        ),
        ({"status": "surprising"}, None, FinishDelta(StopReason.UNKNOWN, "surprising")),
        (
            {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
            "response.failed",
            FinishDelta(StopReason.ERROR, "server_error"),
        ),
        ({"status": "failed"}, "response.failed", FinishDelta(StopReason.ERROR, "failed")),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}},
            "response.incomplete",
            FinishDelta(StopReason.CONTENT_FILTER, "content_filter"),
        ),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            "response.incomplete",
            FinishDelta(StopReason.LENGTH, "max_output_tokens"),
        ),
    ],
)
def test_response_statuses(
    response: dict[str, Any], event: str | None, expected: FinishDelta
) -> None:
    body = {"id": "resp_1", "object": "response", "output": [], **response}
    assert expected in ADAPTER.decode_body(body)
    if event is not None:
        streamed = ADAPTER.new_event_decoder().decode(_event({"type": event, "response": body}))
        assert expected in streamed


def test_flat_error_event() -> None:
    flat = {"type": "error", "code": "server_error", "message": "Try again.", "param": None}
    assert ADAPTER.new_event_decoder().decode(_event(flat)) == [
        ErrorDelta("Try again.", None, "server_error")
    ]


def test_stream_cut_before_terminal_event_is_interrupted() -> None:
    raw = _raw("stream_parallel_function_calls.sse")
    cut = raw[: raw.index(b"event: response.function_call_arguments.done")]
    deltas = _decode(cut)
    assert not any(isinstance(d, (EndDelta, FinishDelta)) for d in deltas)
    result = _assemble(deltas)
    assert result.stop_reason is StopReason.INTERRUPTED and not result.complete
    assert result.output_items[0].attrs.get("incomplete") is True


def _split_points(raw: bytes) -> set[int]:
    """Every 53rd byte, plus the risky ones: around event breaks and inside UTF-8 characters."""
    points = set(range(1, len(raw), 53))
    points.update(i + d for i in range(len(raw)) if raw[i] >= 0x80 for d in (0, 1))
    breaks = [i for i in range(len(raw)) if raw.startswith(b"\n\n", i)]
    points.update(i + d for i in breaks for d in (-1, 0, 1, 2))
    return {p for p in points if 0 < p < len(raw)}


@pytest.mark.parametrize("name", STREAMS)
def test_any_split_point_gives_the_same_deltas(name: str) -> None:
    raw = _raw(name)
    whole = _decode(raw)
    for split in sorted(_split_points(raw)):
        assert _decode(raw[:split], raw[split:]) == whole, split


def test_event_type_falls_back_to_the_event_line() -> None:
    deltas = ADAPTER.new_event_decoder().decode(
        _event({"output_index": 2, "delta": "hi"}, event="response.output_text.delta")
    )
    assert deltas == [TextDelta("hi")]


def test_done_items_fill_in_what_was_not_streamed() -> None:
    decoder = ADAPTER.new_event_decoder()
    message = {"type": "message", "content": [{"type": "output_text", "text": "whole"}]}
    call = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
    deltas = decoder.decode(
        _event({"type": "response.output_item.done", "output_index": 0, "item": message})
    )
    deltas += decoder.decode(
        _event({"type": "response.output_item.done", "output_index": 1, "item": call})
    )
    assert deltas == [TextDelta("whole"), ToolCallStart(1, "call_1", "f"), ToolCallEnd(1, "{}")]


JUNK: list[Any] = [None, 7, True, "x", [], [1, "a"], {}, {"type": 3}]


@pytest.mark.parametrize("name", STREAMS)
def test_malformed_events_are_ignored_never_raised(name: str) -> None:
    decoder = ADAPTER.new_event_decoder()
    for data in ["", "[DONE]", "{", "null", "[]", "42", '"text"', "[" * 100_000]:
        assert decoder.decode(_event(data)) == []
    for event in _events(_raw(name)):
        payload = json.loads(event.data)
        for key in payload:
            for junk in JUNK:
                decoder.decode(_event({**payload, key: junk}))
                nested = payload[key]
                if isinstance(nested, dict):
                    for inner in nested:
                        decoder.decode(_event({**payload, key: {**nested, inner: junk}}))


# --- non-streamed bodies ----------------------------------------------------------------


def test_body_with_reasoning_and_function_call() -> None:
    deltas = ADAPTER.decode_body(_json("nonstream_reasoning_function_call.json")["response"])
    assert deltas[0] == MetaDelta("resp_68f1e0e0e0e0e0e0112233445566aa01", "gpt-5-2025-08-07")
    assert deltas[-1] == EndDelta()
    result = _assemble(deltas)
    _assert_no_marker(deltas, result.output_items)
    assert result.complete and result.violations == []
    assert result.stop_reason is StopReason.TOOL_CALLS and result.raw_stop_reason == "completed"
    thought, call = result.output_items
    assert thought.kind is ItemKind.REASONING
    assert thought.text == (
        "**Finding the order**\n\nI should call lookup_order with 5521."
        "\n\n**Plan**\n\nThen report the status."
    )
    assert thought.attrs["encrypted"] is True and thought.attrs["tokens"] == 192
    assert thought.attrs["item_ids"] == ["rs_68f1e0e0e0e0e0e0aaaa0000000000a1"]
    assert (call.kind, call.call_id, call.tool_name, call.arguments) == (
        ItemKind.TOOL_CALL,
        "call_Zr4tY7uI0oP3aS6dF9gH2jK5",
        "lookup_order",
        '{"order":"5521"}',
    )
    assert (result.usage.total_tokens, result.usage.reasoning_tokens) == (326, 192)


def test_body_that_only_refuses() -> None:
    result = _assemble(ADAPTER.decode_body(_json("nonstream_refusal.json")["response"]))
    assert result.stop_reason is StopReason.REFUSAL and result.raw_stop_reason == "completed"
    assert _kinds(result.output_items) == [ItemKind.REFUSAL]
    assert result.output_items[0].text == "I'm sorry, but I can't help with that."
    finish = ADAPTER.decode_body(_json("nonstream_refusal.json")["response"])[-2]
    assert finish == FinishDelta(StopReason.REFUSAL, "completed")


def test_body_after_tool_results() -> None:
    result = _assemble(
        ADAPTER.decode_body(_json("nonstream_function_call_output_roundtrip.json")["response"])
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert _kinds(result.output_items) == [ItemKind.ASSISTANT_TEXT]
    assert (result.usage.prompt_tokens, result.usage.cached_tokens) == (352, 256)


def test_cache_writes_are_read_from_the_input_details() -> None:
    """Shape: openai.types.responses.ResponseUsage.input_tokens_details (openai 2.x)."""
    body = _json("nonstream_function_call_output_roundtrip.json")["response"]
    usage = {
        "input_tokens": 2000,
        "input_tokens_details": {
            "cached_tokens": 256,
            "cache_write_tokens": 1500,
            "cache_write_tokens_details": {"ttl_30m_tokens": 1500, "ttl_12h_tokens": 0},
        },
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2020,
    }
    result = _assemble(ADAPTER.decode_body({**body, "usage": usage}))
    assert (result.usage.prompt_tokens, result.usage.cached_tokens) == (2000, 256)
    assert result.usage.cache_creation_tokens == 1500


def test_bodies_that_are_not_responses() -> None:
    assert ADAPTER.decode_body(["not", "a", "response"]) == []
    assert ADAPTER.decode_body({}) == [
        MetaDelta(),
        FinishDelta(StopReason.UNKNOWN, None),
        EndDelta(),
    ]
    incomplete = {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}
    assert ADAPTER.decode_body(incomplete)[-2] == FinishDelta(
        StopReason.CONTENT_FILTER, "content_filter"
    )


# --- requests ---------------------------------------------------------------------------


def test_roundtrip_request_items() -> None:
    body = _json("nonstream_function_call_output_roundtrip.json")["request"]
    parsed = ADAPTER.parse_request(body)
    assert (parsed.model, parsed.stream, parsed.previous_response_id) == ("gpt-5", False, None)
    assert _kinds(parsed.items) == [
        ItemKind.INSTRUCTION,
        ItemKind.USER,
        ItemKind.REASONING,
        ItemKind.TOOL_CALL,
        ItemKind.TOOL_RESULT,
    ]
    _assert_no_marker([], parsed.items)
    _, user, thought, call, result = parsed.items
    assert user.text == "Where is my order 5521?" and user.attrs == {"message_index": 0}
    assert thought.text is not None and thought.text.startswith("**Finding the order**")
    assert thought.attrs == {
        "message_index": 1,
        "item_id": "rs_68f1e0e0e0e0e0e0aaaa0000000000a1",
        "encrypted": True,
    }
    assert (call.call_id, call.tool_name, call.arguments) == (
        "call_Zr4tY7uI0oP3aS6dF9gH2jK5",
        "lookup_order",
        '{"order":"5521"}',
    )
    assert call.attrs == {"message_index": 2, "item_id": "fc_68f1e0e0e0e0e0e0bbbb0000000000b1"}
    assert (result.call_id, result.attrs) == ("call_Zr4tY7uI0oP3aS6dF9gH2jK5", {"message_index": 3})
    assert result.text == '{"status":"shipped","eta":"2026-12-02"}'


def test_string_input_and_request_fields() -> None:
    parsed = ADAPTER.parse_request(
        {
            "model": "gpt-4.1",
            "instructions": "Be brief.",
            "input": "Hello",
            "stream": True,
            "previous_response_id": "resp_prev",
            "max_output_tokens": 300,
        }
    )
    assert parsed.items == [
        Item(
            ItemKind.INSTRUCTION, role="system", text="Be brief.", attrs={"field": "instructions"}
        ),
        Item(ItemKind.USER, role="user", text="Hello", attrs={"message_index": 0}),
    ]
    assert (parsed.stream, parsed.previous_response_id, parsed.max_output_tokens) == (
        True,
        "resp_prev",
        300,
    )
    assert ADAPTER.parse_request({"stream": "yes", "max_output_tokens": True}).stream is False
    assert ADAPTER.parse_request({}).items == []


def test_message_roles_and_content_parts() -> None:
    image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"
    items = ADAPTER.parse_request(
        {
            "input": [
                {"type": "message", "role": "developer", "content": "Rules."},
                {"role": "system", "content": [{"type": "input_text", "text": "More rules."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is "},
                        {"type": "input_image", "image_url": image, "detail": "auto"},
                        {"type": "input_text", "text": "this?"},
                        {"type": "input_file", "file_data": "JVBERi0xLjQK", "filename": "a.pdf"},
                    ],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "A ", "annotations": []},
                        {"type": "output_text", "text": "pixel.", "annotations": []},
                    ],
                },
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
                {"role": "assistant", "content": None},
                {"role": "critic", "content": "?"},
            ]
        }
    ).items
    assert [(i.kind, i.role, i.text, i.attrs) for i in items] == [
        (ItemKind.INSTRUCTION, "developer", "Rules.", {"message_index": 0}),
        (ItemKind.INSTRUCTION, "system", "More rules.", {"message_index": 1}),
        (ItemKind.USER, "user", "What is this?", {"message_index": 2}),
        (ItemKind.OTHER, "user", None, {"message_index": 2, "type": "input_image"}),
        (ItemKind.OTHER, "user", None, {"message_index": 2, "type": "input_file"}),
        (ItemKind.ASSISTANT_TEXT, "assistant", "A pixel.", {"message_index": 3}),
        (ItemKind.REFUSAL, "assistant", "No.", {"message_index": 4}),
        (ItemKind.ASSISTANT_TEXT, "assistant", None, {"message_index": 5}),
        (ItemKind.OTHER, "critic", None, {"message_index": 6, "type": "message", "role": "critic"}),
    ]
    stored = json.dumps([item.to_json() for item in items])
    assert "iVBORw0KGgo" not in stored and "JVBERi0" not in stored


def test_tool_items_reasoning_and_other_input_items() -> None:
    items = ADAPTER.parse_request(
        {
            "input": [
                {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": {"x": 1}},
                {
                    "type": "function_call_output",
                    "call_id": "call_a",
                    "output": [
                        {"type": "input_text", "text": "line one"},
                        {"type": "input_image", "image_url": "https://example.test/i.png"},
                        {"type": "input_text", "text": "line two"},
                    ],
                },
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": MARKER}],
                    "encrypted_content": MARKER,
                },
                {"type": "item_reference", "id": "msg_123"},
                {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                {"type": "custom_tool_call", "call_id": "call_c", "name": "g", "input": "raw"},
                {"content": "no type, no role"},
            ]
        }
    ).items
    call, output, thought, reference, search, searched, custom, unknown = items
    assert (call.kind, call.arguments, call.attrs) == (
        ItemKind.TOOL_CALL,
        '{"x": 1}',
        {"message_index": 0},
    )
    assert (output.kind, output.call_id, output.text) == (
        ItemKind.TOOL_RESULT,
        "call_a",
        "line one\nline two",
    )
    assert (thought.kind, thought.text) == (ItemKind.REASONING, None)
    assert thought.attrs == {"message_index": 2, "item_id": "rs_1", "encrypted": True}
    _assert_no_marker([], items)
    assert reference.attrs == {"message_index": 3, "type": "item_reference", "id": "msg_123"}
    # A search the provider ran: its call and its outcome (here no more than its status).
    assert (search.kind, search.call_id, search.attrs["tool_type"]) == (
        ItemKind.TOOL_CALL,
        "ws_1",
        "web_search",
    )
    assert (searched.kind, searched.call_id, searched.text) == (
        ItemKind.TOOL_RESULT,
        "ws_1",
        "completed",
    )
    assert (custom.kind, custom.tool_name, custom.arguments) == (ItemKind.TOOL_CALL, "g", "raw")
    assert custom.attrs == {"message_index": 5, "free_form": True}
    assert (unknown.kind, unknown.attrs["type"]) == (ItemKind.OTHER, "unknown")


@pytest.mark.parametrize("body", [["input"], "text", 3, None])
def test_a_body_that_is_not_an_object_is_refused(body: Any) -> None:
    with pytest.raises(BadRequest) as caught:
        ADAPTER.parse_request(body)
    assert caught.value.param == "body"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"input": 42}, [{"field": "input", "shape": "number"}]),
        ({"input": {"role": "user"}}, [{"field": "input", "shape": "object"}]),
        ({"input": ["hello"]}, [{"message_index": 0, "shape": "string"}]),
        (
            {"input": [{"role": "user", "content": "ok"}, None]},
            [{"message_index": 1, "shape": "null"}],
        ),
        (
            {"input": [{"role": "user", "content": 5}]},
            [{"message_index": 0, "type": "message", "shape": "number"}],
        ),
        (
            {"input": [{"role": "user", "content": ["x"]}]},
            [{"message_index": 0, "shape": "string"}],
        ),
        (
            {"input": [{"role": "critic", "content": "hm"}]},
            [{"message_index": 0, "type": "message", "role": "critic"}],
        ),
        (
            {"input": [{"type": "mystery_item", "payload": {"a": 1}}]},
            [{"message_index": 0, "type": "mystery_item"}],
        ),
    ],
)
def test_shapes_it_cannot_type_are_other_items_never_errors(
    body: dict[str, Any], expected: list[dict[str, Any]]
) -> None:
    """Forward compatible: the provider judges what the gateway does not know."""
    items = ADAPTER.parse_request(body).items
    others = [item.attrs for item in items if item.kind is ItemKind.OTHER]
    assert others == expected


# --- prepared bodies and errors ---------------------------------------------------------


def _prepare(body: dict[str, Any], max_tokens: int | None) -> tuple[dict[str, Any], int | None]:
    prepared = ADAPTER.prepare_body(body, ADAPTER.parse_request(body), max_tokens=max_tokens)
    assert prepared.hide_usage_event is False
    return prepared.body, prepared.clamped_max_tokens


def test_prepare_body_leaves_usage_alone_and_clamps_the_limit() -> None:
    body: dict[str, Any] = {"model": "gpt-4.1", "input": "hi", "stream": True}
    assert _prepare(body, None) == (body, None)
    assert _prepare(body, None)[0] is body

    clamped, limit = _prepare(body, 500)
    assert (clamped["max_output_tokens"], limit) == (500, 500)
    assert "max_output_tokens" not in body and "stream_options" not in clamped

    smaller = {**body, "max_output_tokens": 200}
    assert _prepare(smaller, 500)[0] is smaller
    assert _prepare({**body, "max_output_tokens": 1000}, 500)[0]["max_output_tokens"] == 500
    # The API refuses limits below 16.
    assert _prepare(body, 3) == ({**body, "max_output_tokens": 16}, 16)


def test_prepare_body_accepts_a_prebuilt_parse() -> None:
    parsed = ParsedRequest(model=None, stream=False, items=[], max_output_tokens=50)
    body = {"max_output_tokens": 50}
    assert ADAPTER.prepare_body(body, parsed, max_tokens=60).body is body


def test_errors_in_openai_format() -> None:
    assert ADAPTER.decode_error(
        {"error": {"message": "Quota", "type": "insufficient_quota", "code": "insufficient_quota"}}
    ) == {"message": "Quota", "type": "insufficient_quota", "code": "insufficient_quota"}
    assert ADAPTER.decode_error({"error": "bare"}) == {
        "message": "bare",
        "type": None,
        "code": None,
    }
    assert ADAPTER.decode_error({"error": {"message": "x", "code": 429}})["code"] == "429"  # type: ignore[index]
    assert ADAPTER.decode_error({"error": None}) is None
    assert ADAPTER.decode_error("oops") is None

    refused = BudgetExceeded("Trace t1 used its 10 steps.", code="step_budget_exceeded")
    assert ADAPTER.error_body(refused) == {
        "error": {
            "message": "Trace t1 used its 10 steps.",
            "type": "budget_exceeded",
            "code": "step_budget_exceeded",
            "param": None,
        }
    }
    assert ADAPTER.error_body(BadRequest("bad", param="input"))["error"]["param"] == "input"


def test_adapter_identity() -> None:
    assert isinstance(ADAPTER, OpenAIResponsesAdapter) and ADAPTER.name == "responses"
    assert ADAPTER.is_injected_usage_event(_event({"type": "response.completed"})) is False
    assert ADAPTER.new_event_decoder() is not ADAPTER.new_event_decoder()


def test_background_is_read_from_the_request() -> None:
    base = {"model": "gpt-5", "input": "hi"}
    assert ADAPTER.parse_request({**base, "background": True}).background is True
    assert ADAPTER.parse_request({**base, "background": False}).background is False
    assert ADAPTER.parse_request({**base, "background": "yes"}).background is False
    assert ADAPTER.parse_request(base).background is False


@pytest.mark.parametrize("conversation", ["conv_1", {"id": "conv_1"}], ids=["id", "object"])
def test_a_conversation_is_provider_held_state(conversation: Any) -> None:
    """openai `ResponseCreateParams.conversation`: an id or `ResponseConversationParamParam`."""
    body = {"model": "gpt-5", "conversation": conversation, "input": "hi"}
    parsed = ADAPTER.parse_request(body)
    assert parsed.conversation_id == "conv_1" and parsed.held_state


def test_a_compaction_item_is_provider_held_state() -> None:
    """openai `ResponseCompactionItemParam`, sent back after `responses.compact`."""
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB=="}
    parsed = ADAPTER.parse_request({"model": "gpt-5", "input": [compaction]})
    assert parsed.held_state and parsed.conversation_id is None
    plain = ADAPTER.parse_request({"model": "gpt-5", "input": "hi", "conversation": 7})
    assert not plain.held_state and plain.conversation_id is None
