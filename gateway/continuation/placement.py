"""Which trace a request joins, decided without I/O: from its history's keys, the recent
steps in memory and what the store answered so far, `decide` returns the placement or the
store lookup to make next (the proxy makes it and asks again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway import ids
from gateway.continuation.candidates import choose, echo_text
from gateway.continuation.keys import (
    AMBIGUOUS,
    Boundary,
    CallTurn,
    Scan,
    StepRef,
    call_filter_key,
    last_call_turn,
    sole_emitter,
)
from gateway.continuation.recent_steps import RecentSteps
from gateway.errors import BadRequest
from gateway.items import HELD_STATE, Item


def trace_header(header: str | None) -> str | None:
    """The `X-Loopwatch-Trace-Id` a request names, if any; one that is no trace id is a 400."""
    if header is not None and not ids.TRACE_ID_RE.match(header):
        raise BadRequest(
            "X-Loopwatch-Trace-Id must be 1-128 characters of A-Z a-z 0-9 . _ : -",
            param="X-Loopwatch-Trace-Id",
        )
    return header


def held_in(items: list[Item]) -> tuple[int, str] | None:
    """The last provider-held history (a compaction item) a history carries: the position
    right after it, and its mark."""
    for position in range(len(items) - 1, -1, -1):
        mark = items[position].attrs.get(HELD_STATE)
        if isinstance(mark, str):
            return position + 1, mark
    return None


@dataclass(frozen=True, slots=True)
class Known:
    """What placement knows of a request before any lookup."""

    header: str | None  # a valid X-Loopwatch-Trace-Id
    previous_response_id: str | None
    items: list[Item]  # the history, item references resolved
    scan: Scan  # its continuation keys
    attempt: str  # equal for two requests with the same input, model and mode
    failed: StepRef | None  # the failed attempt this request repeats (taken once)
    conversation_id: str | None = None  # the provider-side conversation it belongs to
    # The last provider-held history the request carries (a compaction item): the position
    # right after it and its mark (`items.HELD_STATE`).
    held: tuple[int, str] | None = None


# The store lookups placement may ask for; each is answered in `Found`.
@dataclass(frozen=True, slots=True)
class ByResponse:
    """The (trace, step) that returned this Responses id."""

    response_id: str


@dataclass(frozen=True, slots=True)
class ByConversation:
    """The (trace, step) of a provider-side conversation's newest step."""

    conversation_id: str


@dataclass(frozen=True, slots=True)
class ByHeldState:
    """The (trace, step) whose output held this provider-held history (a compaction)."""

    held_state: str


@dataclass(frozen=True, slots=True)
class OutputsOf:
    """A recorded step's output items."""

    step_id: str


@dataclass(frozen=True, slots=True)
class Continuing:
    """In one trip: the recorded step the longest of `keys` names, else (when `call_ids` is
    not empty) every recorded step that emitted one of `call_ids`."""

    keys: tuple[str, ...]
    call_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LastStep:
    """A trace's newest step and its output items."""

    trace_id: str


NeedsLookup = ByResponse | ByConversation | ByHeldState | OutputsOf | Continuing | LastStep
LOOKUPS = (ByResponse, ByConversation, ByHeldState, OutputsOf, Continuing, LastStep)


@dataclass(frozen=True, slots=True)
class StoredRows:
    """The answer to `Continuing`: (trace, step, key) of the step a key names, else the
    (call id, trace, step) rows of the steps that emitted the call ids."""

    continuation: tuple[str, str, str] | None
    emitters: tuple[tuple[str, str, str], ...] = ()


@dataclass(slots=True)
class Found:
    """What the store answered so far, by lookup. None: nothing found, or the lookup failed
    (a slow or dead store places the request as if the store held nothing)."""

    responses: dict[ByResponse, tuple[str, str] | None] = field(default_factory=dict)
    conversations: dict[ByConversation, tuple[str, str] | None] = field(default_factory=dict)
    held_states: dict[ByHeldState, tuple[str, str] | None] = field(default_factory=dict)
    outputs: dict[OutputsOf, tuple[Item, ...] | None] = field(default_factory=dict)
    continuations: dict[Continuing, StoredRows | None] = field(default_factory=dict)
    last_steps: dict[LastStep, tuple[str, tuple[Item, ...]] | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Placed:
    """The decision: the trace (None: a new one), where the new items start, the step this
    request continues, the failed attempt it repeats, and the step it claims (so an
    identical run in parallel continues another)."""

    trace_id: str | None
    start: int
    previous: StepRef | None
    retry_of: str | None = None
    claim: str | None = None


def decide(
    known: Known, recent: RecentSteps, may_hold: Callable[[str], bool], found: Found
) -> Placed | NeedsLookup:
    """The placement, or the store lookup to make first. `may_hold(key)`: the store may
    hold this continuation key (others are never looked up).

    The rules, in order: the response a Responses request continues (`previous_response_id`);
    the newest recorded step of the provider-side conversation it names; then the recorded
    step its history continues (see `_continued`), else the step whose output held the
    compaction it carries (what follows that item is new); the `X-Loopwatch-Trace-Id`
    header names the trace over all of them; the retry of a failed attempt stays in that
    attempt's trace; else a new trace. Identical runs in parallel share keys:
    `gateway.continuation.candidates` keeps them apart.
    """
    header, failed = known.header, known.failed
    named = _named(known, recent, found)
    if named is not None:
        return named
    match = _matched(known, recent, may_hold, found)
    if isinstance(match, LOOKUPS):
        return match
    if header is not None:
        retry_of = _retry_in(failed, header)
        if match is not None and match[1].trace_id == header:
            return Placed(header, *match, retry_of)
        # The history does not extend a recorded step: compare it with the trace's last one,
        # so a rewritten or dropped assistant turn is still checked against what was emitted.
        last = _last_of(header, recent, found)
        return last if isinstance(last, LOOKUPS) else Placed(header, 0, last, retry_of)
    if failed is not None:
        # The same request again after an error: a retry in the failed attempt's trace, even
        # when it was the trace's first request (nothing to continue then).
        start = 0 if match is None else match[0]
        return Placed(failed.trace_id, start, recent.last_of(failed.trace_id), failed.step_id)
    if match is not None:
        return Placed(match[1].trace_id, *match, claim=match[1].step_id)
    return Placed(None, 0, None)


def _named(known: Known, recent: RecentSteps, found: Found) -> Placed | NeedsLookup | None:
    """After the response the request continues, else after the newest recorded step of
    the conversation it names: the provider prepends what they hold, so all the request
    sends is new. The header still names the trace; that step's calls are what results
    answer."""
    ref: StepRef | NeedsLookup | None = None
    if known.previous_response_id:
        response = known.previous_response_id
        ref = _by_id(recent.by_response(response), ByResponse(response), found.responses, found)
    if ref is None and known.conversation_id:
        conversation = known.conversation_id
        lookup = ByConversation(conversation)
        ref = _by_id(recent.by_conversation(conversation), lookup, found.conversations, found)
    if ref is None or isinstance(ref, LOOKUPS):
        return ref
    trace_id = known.header or ref.trace_id
    return Placed(trace_id, 0, ref, _retry_in(known.failed, trace_id))


def _retry_in(failed: StepRef | None, trace_id: str) -> str | None:
    return failed.step_id if failed is not None and failed.trace_id == trace_id else None


Match = tuple[int, StepRef] | None


def _matched(
    known: Known, recent: RecentSteps, may_hold: Callable[[str], bool], found: Found
) -> Match | NeedsLookup:
    """The step the history continues, else the step whose output held the compaction it
    carries: only then, as every later request of the run still carries the compaction
    and continues its newest step by its history."""
    match = _continued(known, recent, may_hold, found)
    if match is not None or known.held is None:
        return match
    position, mark = known.held
    rows = found.held_states
    ref = _by_id(recent.by_held_state(mark), ByHeldState(mark), rows, found)
    return ref if ref is None or isinstance(ref, LOOKUPS) else (position, ref)


def _continued(
    known: Known, recent: RecentSteps, may_hold: Callable[[str], bool], found: Found
) -> Match | NeedsLookup:
    """The recorded step this history continues and where its new items start: the exact
    echo of a step first, else the step that emitted the tool calls of its last call turn,
    else the step whose whole input the history begins with. Several candidates that
    nothing tells apart continue none (the request starts its own trace)."""
    in_memory = _in_memory(known, recent)
    if not isinstance(in_memory, CallTurn | _StoreOnly):
        return in_memory
    turn = in_memory if isinstance(in_memory, CallTurn) else None
    # Only keys and call ids the store may hold are looked up: in a gateway that is its
    # store's only writer, a history that continues nothing recorded costs no round trip.
    boundaries = [b for b in known.scan.boundaries if may_hold(b.key)]
    if turn is not None and not any(may_hold(call_filter_key(c)) for c in turn.call_ids):
        turn = None
    if not boundaries and turn is None:
        return None
    lookup = Continuing(tuple(b.key for b in boundaries), () if turn is None else turn.call_ids)
    if lookup not in found.continuations:
        return lookup
    row = _stored_continuation(found.continuations[lookup], boundaries, turn)
    if row is None:
        return None
    position, trace_id, step_id = row
    ref = _with_outputs(trace_id, step_id, found)
    return ref if isinstance(ref, LOOKUPS) else (position, ref)


@dataclass(frozen=True, slots=True)
class _StoreOnly:
    """Memory knows nothing; the store may know the history's keys (no call turn to ask)."""


def _in_memory(known: Known, recent: RecentSteps) -> Match | CallTurn | _StoreOnly:
    """The match among recent steps; else what the store is still to be asked: the last
    call turn's ids (unless several recent steps emitted them) or the keys alone."""
    items, scan, attempt = known.items, known.scan, known.attempt
    found = recent.continued(scan.boundaries)
    if found is not None:
        ref = choose(found[1], attempt, recent.claimed_by)
        return None if ref is None else (found[0].position, ref)
    turn = last_call_turn(items)
    if turn is not None:
        emitted = recent.emitters(turn.call_ids)
        ref = sole_emitter(emitted.values())
        if ref is not None:
            return turn.end, ref
        if AMBIGUOUS in emitted.values():
            turn = None  # several steps emitted these ids: the store cannot say more
    prefixed = recent.prefixed(scan.starts)
    if prefixed is not None:
        start, refs = prefixed
        echo = echo_text(items, start.position)
        ref = choose(refs, attempt, recent.claimed_by, echo)
        if ref is None:
            return None
        if not echo.typed_calls:
            # The run echoed that step's calls as text: there are no typed calls to pair.
            ref = StepRef(ref.trace_id, ref.step_id)
        return start.position, ref
    return _StoreOnly() if turn is None else turn


def _stored_continuation(
    rows: StoredRows | None, boundaries: list[Boundary], turn: CallTurn | None
) -> tuple[int, str, str] | None:
    """What the store's rows say: (start of new items, trace, step)."""
    if rows is None:
        return None
    if rows.continuation is not None:
        trace_id, step_id, key = rows.continuation
        return next(b.position for b in boundaries if b.key == key), trace_id, step_id
    if turn is None:
        return None
    emitters: dict[str, StepRef | str] = {}
    for call_id, trace_id, step_id in rows.emitters:
        earlier = emitters.get(call_id)
        if isinstance(earlier, StepRef) and earlier.step_id != step_id:
            emitters[call_id] = AMBIGUOUS
        elif earlier is None:
            emitters[call_id] = StepRef(trace_id, step_id)
    ref = sole_emitter(emitters.values())
    return None if ref is None else (turn.end, ref.trace_id, ref.step_id)


def _by_id(
    ref: StepRef | None,
    lookup: ByResponse | ByConversation | ByHeldState,
    rows: Mapping[Any, tuple[str, str] | None],
    found: Found,
) -> StepRef | NeedsLookup | None:
    """The step an id names: `ref` from memory, else the store's answer to `lookup`."""
    if ref is not None:
        return ref
    if lookup not in rows:
        return lookup
    row = rows[lookup]
    return None if row is None else _with_outputs(*row, found)


def _last_of(trace_id: str, recent: RecentSteps, found: Found) -> StepRef | NeedsLookup | None:
    ref = recent.last_of(trace_id)
    if ref is not None:
        return ref
    lookup = LastStep(trace_id)
    if lookup not in found.last_steps:
        return lookup
    row = found.last_steps[lookup]
    return None if row is None else StepRef(trace_id, row[0], row[1])


def _with_outputs(trace_id: str, step_id: str, found: Found) -> StepRef | NeedsLookup:
    lookup = OutputsOf(step_id)
    if lookup not in found.outputs:
        return lookup
    return StepRef(trace_id, step_id, found.outputs[lookup] or ())
