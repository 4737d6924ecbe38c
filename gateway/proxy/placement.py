"""Places a request in a trace: explicit header, the response it continues (Responses
`previous_response_id`, an Anthropic thread's `previous_message_id`), or automatic threading:
the retry of a failed attempt, the exact echo of a recorded step, the tool call ids it
echoes, else a recorded step's whole input it begins with (a history re-rendered as text).
Identical runs in parallel share keys: `gateway.continuation.candidates` keeps them apart.

Recent steps are found in memory; other replicas' steps in the store, with a short timeout
so a slow database never holds a request back (the request then starts a new trace).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.engine import Engine

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
    resolve_references,
    sole_emitter,
)
from gateway.errors import BadRequest
from gateway.items import Item
from gateway.protocols.base import ParsedRequest
from gateway.proxy.deps import Deps
from gateway.store import queries

log = logging.getLogger(__name__)

STORE_LOOKUP_SECONDS = 0.25
LONG_HISTORY = 2000  # items
Argument = TypeVar("Argument")
Result = TypeVar("Result")


@dataclass(slots=True)
class Placement:
    trace_id: str
    new_items: list[Item]
    previous: StepRef | None  # the step this request continues, if known
    input_state: bytes  # the continuation chain over the whole input
    # The history with `item_reference`s replaced by the recorded items they name, and
    # whether any stayed unknown (its target might be a call a result answers).
    items: list[Item]
    unresolved_references: bool = False
    attempt: str = ""  # equal for two requests with the same input, model and mode
    retry_of: str | None = None  # the failed attempt (step id) this request repeats


async def place(deps: Deps, header: str | None, parsed: ParsedRequest) -> Placement:
    if header is not None and not ids.TRACE_ID_RE.match(header):
        raise BadRequest(
            "X-Loopwatch-Trace-Id must be 1-128 characters of A-Z a-z 0-9 . _ : -",
            param="X-Loopwatch-Trace-Id",
        )
    items, unresolved = resolve_references(parsed.items, deps.recent.output_item)
    if len(items) < LONG_HISTORY:
        scan = deps.keys.scan(items)
    else:  # hashing a very long history would hold the event loop
        scan = await asyncio.to_thread(deps.keys.scan, items)
    attempt = scan.attempt_key(parsed.model, parsed.stream)

    def placed(
        trace_id: str, start: int, previous: StepRef | None, retry_of: str | None = None
    ) -> Placement:
        new = items[start:]
        return Placement(trace_id, new, previous, scan.state, items, unresolved, attempt, retry_of)

    failed = deps.recent.take_failed(attempt)
    if parsed.previous_response_id:
        ref = await _by_response(deps, parsed.previous_response_id)
        if ref is not None:
            # The header still names the trace; the response's calls are what results answer.
            trace_id = header or ref.trace_id
            return placed(trace_id, 0, ref, _retry_in(failed, trace_id))
    match = await _continued(deps, items, scan, attempt)
    if header is not None:
        retry_of = _retry_in(failed, header)
        if match is not None and match[1].trace_id == header:
            return placed(header, *match, retry_of)
        # The history does not extend a recorded step: compare it with the trace's last one,
        # so a rewritten or dropped assistant turn is still checked against what was emitted.
        return placed(header, 0, await _last_of(deps, header), retry_of)
    if failed is not None:
        # The same request again after an error: a retry in the failed attempt's trace, even
        # when it was the trace's first request (nothing to continue then).
        start = 0 if match is None else match[0]
        previous = deps.recent.last_of(failed.trace_id)
        return placed(failed.trace_id, start, previous, failed.step_id)
    if match is not None:
        deps.recent.claim(match[1].step_id, attempt)
        return placed(match[1].trace_id, *match)
    return placed(ids.new_trace_id(), 0, None)


def _retry_in(failed: StepRef | None, trace_id: str) -> str | None:
    return failed.step_id if failed is not None and failed.trace_id == trace_id else None


async def _continued(
    deps: Deps, items: list[Item], scan: Scan, attempt: str
) -> tuple[int, StepRef] | None:
    """The recorded step this history continues and where its new items start: the exact
    echo of a step first, else the step that emitted the tool calls of its last call turn,
    else the step whose whole input the history begins with. Several candidates that
    nothing tells apart continue none (the request starts its own trace)."""
    recent = deps.recent
    found = recent.continued(scan.boundaries)
    if found is not None:
        ref = choose(found[1], attempt, recent.claimed_by)
        return None if ref is None else (found[0].position, ref)
    turn = last_call_turn(items)
    if turn is not None:
        known = recent.emitters(turn.call_ids)
        ref = sole_emitter(known.values())
        if ref is not None:
            return turn.end, ref
        if AMBIGUOUS in known.values():
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
    boundaries = scan.boundaries
    # Only keys and call ids the store may hold are looked up: in a gateway that is its
    # store's only writer, a history that continues nothing recorded costs no round trip.
    may_hold = deps.known_keys.may_hold
    boundaries = [b for b in boundaries if may_hold(b.key)]
    if turn is not None and not any(may_hold(call_filter_key(c)) for c in turn.call_ids):
        turn = None
    if not boundaries and turn is None:
        return None
    row = await _lookup(_stored_continuation, deps, (boundaries, turn))
    if row is None:
        return None
    position, trace_id, step_id = row
    return position, await _with_outputs(deps, trace_id, step_id)


def _stored_continuation(
    engine: Engine, query: tuple[list[Boundary], CallTurn | None]
) -> tuple[int, str, str] | None:
    """Both store lookups in one trip off the event loop: (start of new items, trace, step)."""
    boundaries, turn = query
    row = queries.find_continuation(engine, [b.key for b in boundaries])
    if row is not None:
        trace_id, step_id, key = row
        return next(b.position for b in boundaries if b.key == key), trace_id, step_id
    if turn is None:
        return None
    emitters: dict[str, StepRef | str] = {}
    for call_id, trace_id, step_id in queries.call_emitters(engine, list(turn.call_ids)):
        earlier = emitters.get(call_id)
        ref = StepRef(trace_id, step_id)
        if isinstance(earlier, StepRef) and earlier.step_id != step_id:
            emitters[call_id] = AMBIGUOUS
        elif earlier is None:
            emitters[call_id] = ref
    found = sole_emitter(emitters.values())
    return None if found is None else (turn.end, found.trace_id, found.step_id)


async def _by_response(deps: Deps, response_id: str) -> StepRef | None:
    ref = deps.recent.by_response(response_id)
    if ref is not None:
        return ref
    row = await _lookup(queries.find_by_response_id, deps, response_id)
    return None if row is None else await _with_outputs(deps, *row)


async def _last_of(deps: Deps, trace_id: str) -> StepRef | None:
    ref = deps.recent.last_of(trace_id)
    if ref is not None:
        return ref
    row = await _lookup(queries.last_step, deps, trace_id)
    return None if row is None else StepRef(trace_id, row[0], tuple(row[1]))


async def _with_outputs(deps: Deps, trace_id: str, step_id: str) -> StepRef:
    outputs = await _lookup(queries.step_output_items, deps, step_id) or []
    return StepRef(trace_id, step_id, tuple(outputs))


async def _lookup(
    function: Callable[[Engine, Argument], Result], deps: Deps, argument: Argument
) -> Result | None:
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(function, deps.engine, argument), STORE_LOOKUP_SECONDS
        )
    except Exception as exc:  # a slow or dead store must not fail the request
        log.warning("trace lookup in the store failed: %r", exc)
        return None
