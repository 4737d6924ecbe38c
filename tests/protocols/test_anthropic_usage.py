"""Anthropic usage is what is billed: iterations summed, server tool requests, cache writes
kept an hour, the model that answered, a refusal's category; streamed and not.

Fixtures: tests/fixtures/messages/ (each names the anthropic package types it follows).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.items import Billing, ItemKind, Share, StopReason, Usage
from gateway.protocols.anthropic.messages import ADAPTER
from gateway.stream.assembler import Assembled, Assembler
from gateway.stream.deltas import BillingDelta, Delta, MetaDelta
from gateway.stream.sse import SSEDecoder
from tests.factories import output_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "messages"


def streamed(name: str) -> Assembled:
    decoder, sse = ADAPTER.new_event_decoder(), SSEDecoder()
    events = [*sse.decode((FIXTURES / name).read_bytes()), *sse.flush()]
    return assembled([delta for event in events for delta in decoder.decode(event)])


def assembled(deltas: list[Delta]) -> Assembled:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler)


def body(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return loaded["response"]


def tokens(prompt: int, completion: int, cached: int | None = 0, creation: int | None = 0) -> Usage:
    return Usage(prompt, completion, prompt + completion, cached, None, creation)


def test_a_compacted_streamed_turn_counts_the_compaction_the_top_level_leaves_out() -> None:
    result = streamed("stream_compaction_web_search.sse")
    # Top level: 23,000 in and 1,000 out; the compaction's 180,000 and 3,500 are billed too.
    assert result.usage == tokens(203_000, 4_500)
    assert result.usage.total() == 207_500
    assert result.billing.iterations == 2
    assert result.billing.server_tool_requests == {"web_search": 2}  # no fetch: no count
    assert result.billing.shares == ()  # no iteration names a model: one model ran
    assert result.model == "claude-opus-4-6"
    assert result.stop_reason is StopReason.COMPLETED and result.complete


def test_a_turn_served_by_a_fallback_model_is_that_models_step() -> None:
    result = assembled(ADAPTER.decode_body(body("nonstream_fallback_served.json")))
    assert result.model == "claude-sonnet-4-6"  # the fallback_message iteration's model
    assert result.usage == tokens(3_540, 160, creation=2_000)
    assert result.billing == Billing(
        {"web_search": 1, "web_fetch": 1},
        2,
        (
            Share("claude-opus-4-6", tokens(2_020, 12, creation=2_000), 2_000),
            Share("claude-sonnet-4-6", tokens(1_520, 148)),
        ),
        2_000,
    )
    # The block marking the hand-over is kept in its place.
    kinds = [item.kind for item in result.output_items]
    assert kinds == [ItemKind.OTHER, ItemKind.ASSISTANT_TEXT]


def test_a_refusal_keeps_its_category_streamed_and_not() -> None:
    result = streamed("stream_refusal_category.sse")
    assert result.stop_reason is StopReason.REFUSAL
    assert result.refusal_category == "cyber"
    assert result.usage == tokens(41, 9)
    message = {
        "id": "msg_01LwRefusal",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": "refusal",
        "stop_details": {"type": "refusal", "category": "bio", "explanation": None},
        "usage": {"input_tokens": 12, "output_tokens": 0},
    }
    result = assembled(ADAPTER.decode_body(message))
    assert (result.stop_reason, result.refusal_category) == (StopReason.REFUSAL, "bio")
    # A refusal that maps to no named category (`category: null`), or has no details.
    for details in ({"type": "refusal", "category": None}, None, "odd"):
        result = assembled(ADAPTER.decode_body({**message, "stop_details": details}))
        assert result.stop_reason is StopReason.REFUSAL and result.refusal_category is None


def test_cache_writes_only_the_iterations_report_are_counted() -> None:
    writes = {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}
    use = {
        "input_tokens": 10,
        "output_tokens": 5,
        "iterations": [
            {"type": "message", "input_tokens": 4, "output_tokens": 2,
             "cache_read_input_tokens": 0, "cache_creation_input_tokens": 300,
             "cache_creation": writes},
            {"type": "message", "input_tokens": 6, "output_tokens": 3,
             "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0},
        ],
    }  # fmt: skip
    result = assembled(ADAPTER.decode_body(_message(use)))
    assert result.usage == tokens(610, 5, cached=300, creation=300)
    assert result.billing.cache_write_1h_tokens == 200
    assert result.billing.iterations == 2


def _message(use: Any) -> dict[str, Any]:
    return {
        "id": "msg_01LwUsage",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": use,
    }


def test_a_plain_usage_reports_nothing_else_billed() -> None:
    deltas = ADAPTER.decode_body(_message({"input_tokens": 3, "output_tokens": 4}))
    assert not [d for d in deltas if isinstance(d, BillingDelta)]
    assert [d.model for d in deltas if isinstance(d, MetaDelta)] == ["claude-sonnet-4-6"]
    one = {"input_tokens": 3, "output_tokens": 4, "iterations": [{"type": "message", **{}}]}
    result = assembled(ADAPTER.decode_body(_message(one)))
    assert result.billing == Billing()  # one iteration: nothing to say
    # An iteration without counts leaves the top level's.
    assert result.usage == tokens(3, 4, cached=None, creation=None)


def test_odd_usage_shapes_never_raise_and_count_what_they_can() -> None:
    odd: list[Any] = [
        {"input_tokens": 5, "output_tokens": 1, "iterations": "many"},
        {"input_tokens": 5, "output_tokens": 1, "iterations": [None, 3, {"input_tokens": "x"}]},
        {"input_tokens": 5, "output_tokens": 1, "server_tool_use": {"web_search_requests": True}},
        {"input_tokens": 5, "output_tokens": 1, "server_tool_use": [1, 2]},
        {"input_tokens": 5, "output_tokens": 1, "cache_creation": 7},
        {"input_tokens": 5, "output_tokens": 1, "iterations": [{"type": "fallback_message"}]},
    ]
    for use in odd:
        result = assembled(ADAPTER.decode_body(_message(use)))
        assert result.usage == tokens(5, 1, cached=None, creation=None), use
        assert result.billing.server_tool_requests == {}
        assert result.model == "claude-sonnet-4-6"
