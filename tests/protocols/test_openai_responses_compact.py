"""The Responses compact endpoint's adapter: its request is a Responses request that is never
streamed and gets no parameter added; its answer is the compacted history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.items import HELD_STATE, ItemKind, StopReason
from gateway.protocols.openai_responses import ADAPTER as RESPONSES
from gateway.protocols.openai_responses_compact import ADAPTER
from gateway.stream.assembler import Assembler
from gateway.stream.deltas import FinishDelta, MetaDelta
from tests.factories import output_of

FIXTURE = Path(__file__).parent.parent / "fixtures" / "responses" / "nonstream_compact.json"
# Planted in the fixture's encrypted_content: it must never surface.
MARKER = "LWMARKER-7f3a9c-raw-chain-of-thought"


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def test_its_steps_are_responses_steps_marked_compact_and_never_streamed() -> None:
    body = {**_fixture()["request"], "stream": True}
    parsed = ADAPTER.parse_request(body)
    assert ADAPTER.name == RESPONSES.name == "responses"
    assert ADAPTER.path == "/v1/responses/compact"
    assert parsed.stream is False
    assert parsed.attrs == {"operation": "compact"}
    assert parsed.compaction is True
    assert [item.kind for item in parsed.items] == [
        ItemKind.INSTRUCTION,
        ItemKind.USER,
        ItemKind.TOOL_CALL,
        ItemKind.TOOL_RESULT,
        ItemKind.ASSISTANT_TEXT,
    ]
    # The Responses adapter's own requests stay unmarked.
    plain = RESPONSES.parse_request(_fixture()["request"])
    assert plain.attrs == {} and plain.compaction is False


def test_a_token_budget_adds_no_parameter_the_endpoint_does_not_take() -> None:
    body = _fixture()["request"]
    prepared = ADAPTER.prepare_body(body, ADAPTER.parse_request(body), max_tokens=5)
    assert prepared.body is body and prepared.clamped_max_tokens is None
    # Where a Responses request would have its completion limit clamped.
    clamped = RESPONSES.prepare_body(body, RESPONSES.parse_request(body), max_tokens=5)
    assert clamped.body["max_output_tokens"] == 16


def test_the_compacted_history_is_recorded_typed_its_content_never() -> None:
    deltas = ADAPTER.decode_body(_fixture()["response"])
    assert MARKER not in repr(deltas)
    meta = deltas[0]
    assert isinstance(meta, MetaDelta) and meta.response_id == "resp_68c42e11cmp"
    finish = deltas[-2]
    assert isinstance(finish, FinishDelta) and finish.stop_reason is StopReason.COMPLETED
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    result = output_of(assembler)
    assert MARKER not in json.dumps([item.to_json() for item in result.output_items])
    # The reasoning tokens it billed are recorded as every Responses step's are.
    reasoning, user, compaction = result.output_items
    assert reasoning.kind is ItemKind.REASONING and reasoning.attrs["tokens"] == 256
    assert (user.kind, user.role, user.text) == (
        ItemKind.USER,
        "user",
        "What is the weather in Paris?",
    )
    assert "message_index" not in user.attrs
    assert compaction.kind is ItemKind.OTHER
    assert compaction.attrs["type"] == "compaction"
    assert compaction.attrs["item_ids"] == ["cmp_68c42e11"]
    assert isinstance(compaction.attrs[HELD_STATE], str)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.usage.prompt_tokens == 1240 and result.usage.completion_tokens == 310
    assert result.usage.cached_tokens == 1024 and result.usage.reasoning_tokens == 256


def test_its_echo_carries_the_same_mark_with_or_without_its_id() -> None:
    """Clients such as Codex send the compaction item back without its id."""
    answer = _fixture()["response"]
    recorded = ADAPTER.decode_body(answer)
    assembler = Assembler()
    for delta in recorded:
        assembler.feed(delta)
    mark = output_of(assembler).output_items[-1].attrs[HELD_STATE]
    compaction = answer["output"][-1]
    for echoed in (compaction, {k: v for k, v in compaction.items() if k != "id"}):
        body = {"model": "gpt-5", "input": [*answer["output"][:-1], echoed, "next"]}
        items = RESPONSES.parse_request({**body, "input": body["input"][:-1]}).items
        assert items[-1].attrs[HELD_STATE] == mark
        assert MARKER not in json.dumps([item.to_json() for item in items])
    other = {**compaction, "encrypted_content": "gAAAAABpother=="}
    items = RESPONSES.parse_request({"model": "gpt-5", "input": [other]}).items
    assert items[0].attrs[HELD_STATE] != mark


def test_a_compaction_in_a_response_s_output_is_marked_too() -> None:
    """Server-side compaction: a `compaction` item in an ordinary response's output."""
    compaction = _fixture()["response"]["output"][-1]
    body = {"id": "resp_1", "status": "completed", "output": [compaction], "model": "gpt-5"}
    assembler = Assembler()
    for delta in RESPONSES.decode_body(body):
        assembler.feed(delta)
    (item,) = output_of(assembler).output_items
    parsed = RESPONSES.parse_request({"model": "gpt-5", "input": [compaction]})
    assert item.attrs[HELD_STATE] == parsed.items[0].attrs[HELD_STATE]
