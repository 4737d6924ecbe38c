"""Property-based fuzzing of everything that reads what clients and providers send.

Random and mutated transcripts, seeded from the recorded fixtures: the SSE decoder, the three
adapters' request parsers, stream and body decoders, the assembler, pairing and threading
never raise anything but the gateway's own BadRequest, and always give a step's result.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.checks.pairing import check_history, check_request
from gateway.continuation.keys import (
    ContinuationKeys,
    StepRef,
    last_call_turn,
    resolve_references,
)
from gateway.continuation.recent_steps import RecentSteps
from gateway.errors import GatewayError
from gateway.items import Item, ItemKind
from gateway.protocols.anthropic.messages import ADAPTER as MESSAGES
from gateway.protocols.openai_chat.completions import ADAPTER as CHAT
from gateway.protocols.openai_responses import ADAPTER as RESPONSES
from gateway.stream.assembler import Assembler
from gateway.stream.sse import SSEDecoder, SSEEvent
from tests.factories import fixture_names, load_fixture, output_of

ADAPTERS = {"chat": CHAT, "responses": RESPONSES, "messages": MESSAGES}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# JSON values of every shape, with the wire field names the adapters look at as keys, so
# random documents reach deep into the parsers instead of failing at the first type check.
FIELD_NAMES = [
    "type",
    "role",
    "content",
    "messages",
    "input",
    "text",
    "id",
    "call_id",
    "tool_call_id",
    "tool_use_id",
    "name",
    "arguments",
    "input_schema",
    "tool_calls",
    "function",
    "choices",
    "delta",
    "index",
    "output",
    "output_index",
    "item",
    "usage",
    "finish_reason",
    "stop_reason",
    "message",
    "content_block",
    "thread",
    "previous_message_id",
    "previous_response_id",
    "model",
    "stream",
    "max_tokens",
    "system",
    "instructions",
    "reasoning",
    "summary",
    "thinking",
    "response",
    "status",
    "error",
    "code",
    "partial_json",
    "refusal",
    "execution",
    "environment",
    "approval_request_id",
    "action",
]
scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=40,
)


def _mutate(value: Any, draw: Any) -> Any:
    """Replace one node of a document (chosen by the draw) with a random JSON value."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate(value[key], draw)}
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutate(value[index], draw), *value[index + 1 :]]
    return draw(json_values)


def _requests() -> list[tuple[str, Any]]:
    found = []
    for protocol in ADAPTERS:
        for name in fixture_names(protocol, "*.json"):
            document = load_fixture(protocol, name)
            if isinstance(document, dict) and isinstance(document.get("request"), dict):
                found.append((protocol, document["request"]))
    return found


def _streams() -> list[tuple[str, bytes]]:
    return [(p, load_fixture(p, name)) for p in ADAPTERS for name in fixture_names(p, "*.sse")]


REQUESTS = _requests()
STREAMS = _streams()


def _decode_stream(protocol: str, events: list[SSEEvent]) -> Assembler:
    decoder = ADAPTERS[protocol].new_event_decoder()
    assembler = Assembler()
    for event in events:
        for delta in decoder.decode(event):
            assembler.feed(delta)
    return assembler


# --- SSE ----------------------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_sse_decoder_keeps_every_byte_of_any_input(data: bytes, cuts: list[int]) -> None:
    decoder = SSEDecoder(max_event_bytes=512)
    points = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    events: list[SSEEvent] = []
    for start, end in itertools.pairwise(points):
        events += decoder.decode(data[start:end])
    events += decoder.flush()
    assert b"".join(e.raw for e in events) + decoder.pending_raw == data


# --- requests -----------------------------------------------------------------------------


@FUZZ
@given(protocol=st.sampled_from(sorted(ADAPTERS)), body=json_values)
def test_request_parsers_refuse_only_with_our_error(protocol: str, body: Any) -> None:
    with contextlib.suppress(GatewayError):
        ADAPTERS[protocol].parse_request(body)


@FUZZ
@given(case=st.sampled_from(REQUESTS), data=st.data())
def test_mutated_real_requests_parse_or_get_our_error(
    case: tuple[str, Any], data: st.DataObject
) -> None:
    protocol, request = case
    body = _mutate(request, data.draw)
    try:
        parsed = ADAPTERS[protocol].parse_request(body)
    except GatewayError:
        return
    check_request(
        parsed.items,
        history=ADAPTERS[protocol].history,
        new_items=parsed.items,
        previous_output=None,
        continues_response=parsed.previous_response_id is not None,
    )
    keys = ContinuationKeys(b"fuzz-secret")
    keys.boundaries(parsed.items)
    last_call_turn(parsed.items)


# --- provider answers ---------------------------------------------------------------------


def _mutated_event(event: SSEEvent, draw: Any) -> SSEEvent:
    try:
        payload = json.loads(event.data)
    except ValueError:
        return SSEEvent(event.event, draw(st.text(max_size=40)), raw=event.raw)
    data = json.dumps(_mutate(payload, draw))
    return SSEEvent(event.event, data, raw=event.raw)


@FUZZ
@given(case=st.sampled_from(STREAMS), data=st.data())
def test_mutated_real_streams_always_assemble(case: tuple[str, bytes], data: st.DataObject) -> None:
    protocol, transcript = case
    decoder = SSEDecoder()
    events = decoder.decode(transcript) + decoder.flush()
    chosen = data.draw(st.sets(st.integers(0, max(len(events) - 1, 0)), max_size=4))
    mutated = [_mutated_event(e, data.draw) if i in chosen else e for i, e in enumerate(events)]
    if data.draw(st.booleans()):  # a stream cut anywhere
        mutated = mutated[: data.draw(st.integers(0, len(mutated)))]
    result = output_of(_decode_stream(protocol, mutated))
    assert result.stop_reason is not None


@FUZZ
@given(protocol=st.sampled_from(sorted(ADAPTERS)), body=json_values)
def test_random_bodies_always_assemble(protocol: str, body: Any) -> None:
    assembler = Assembler()
    for delta in ADAPTERS[protocol].decode_body(body):
        assembler.feed(delta)
    output_of(assembler)
    ADAPTERS[protocol].decode_error(body)


@FUZZ
@given(protocol=st.sampled_from(sorted(ADAPTERS)), events=st.lists(json_values, max_size=12))
def test_random_event_streams_always_assemble(protocol: str, events: list[Any]) -> None:
    sse = [SSEEvent(None, json.dumps(e)) for e in events]
    output_of(_decode_stream(protocol, sse))


# --- pairing and threading ----------------------------------------------------------------

items = st.builds(
    Item,
    kind=st.sampled_from(list(ItemKind)),
    role=st.none() | st.sampled_from(["user", "assistant", "tool"]),
    text=st.none() | st.text(max_size=10),
    call_id=st.none() | st.sampled_from(["c1", "c2", "c3", ""]),
    tool_name=st.none() | st.sampled_from(["f", "g"]),
    arguments=st.none() | st.sampled_from(["{}", '{"a": 1}', "[", "[" * 5000 + "]" * 5000]),
    attrs=st.dictionaries(
        st.sampled_from(["type", "id", "internal_id", "item_ids", "incomplete"]),
        st.none() | st.text(max_size=5) | st.booleans() | st.lists(st.text(max_size=5)),
        max_size=3,
    ),
)


@FUZZ
@given(history=st.lists(items, max_size=25), protocol=st.sampled_from(sorted(ADAPTERS)))
def test_pairing_and_threading_take_any_history(history: list[Item], protocol: str) -> None:
    check_history(history, history=ADAPTERS[protocol].history)
    check_request(
        history,
        history=ADAPTERS[protocol].history,
        new_items=history[len(history) // 2 :],
        previous_output=history[: len(history) // 2],
        continues_response=False,
    )
    keys = ContinuationKeys(b"fuzz-secret")
    boundaries, state = keys.boundaries(history)
    keys.step_key(state, history)
    recent = RecentSteps(budget=64 * 1024)
    recent.remember("k", "r", StepRef("t", "s", tuple(history)))
    recent.continued(boundaries)
    resolve_references(history, recent.output_items)
    last_call_turn(history)


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
def test_deeply_nested_tool_arguments_are_recorded(protocol: str) -> None:
    """Arguments nested 100k deep: a string to the parsers, never a RecursionError."""
    deep = "[" * 100_000 + "]" * 100_000
    history = [
        Item(ItemKind.USER, text="go"),
        Item(ItemKind.TOOL_CALL, call_id="c1", tool_name="f", arguments=deep),
        Item(ItemKind.TOOL_RESULT, call_id="c1", text=deep),
    ]
    keys = ContinuationKeys(b"fuzz-secret")
    boundaries, _ = keys.boundaries(history)
    assert boundaries
    assert check_history(history, history=ADAPTERS[protocol].history) == []


def test_deeply_nested_arguments_in_an_answer_are_flagged_not_raised() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    body = {
        "id": "chatcmpl-deep",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": deep},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    assembler = Assembler()
    for delta in CHAT.decode_body(body):
        assembler.feed(delta)
    result = output_of(assembler)
    assert [item.kind for item in result.output_items] == [ItemKind.TOOL_CALL]
    assert [v.kind.value for v in result.violations] == ["invalid_tool_arguments"]
