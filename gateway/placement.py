"""Places a request in a trace: explicit header, previous_response_id, or automatic threading.

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
from gateway.deps import Deps
from gateway.errors import BadRequest
from gateway.items import Item
from gateway.protocols.base import ParsedRequest
from gateway.store import queries
from gateway.threading import Boundary, StepRef

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


async def place(deps: Deps, header: str | None, parsed: ParsedRequest) -> Placement:
    if header is not None and not ids.TRACE_ID_RE.match(header):
        raise BadRequest(
            "X-Loopwatch-Trace-Id must be 1-128 characters of A-Z a-z 0-9 . _ : -",
            param="X-Loopwatch-Trace-Id",
        )
    if len(parsed.items) < LONG_HISTORY:
        boundaries, state = deps.keys.boundaries(parsed.items)
    else:  # hashing a very long history would hold the event loop
        boundaries, state = await asyncio.to_thread(deps.keys.boundaries, parsed.items)
    if parsed.previous_response_id:
        ref = await _by_response(deps, parsed.previous_response_id)
        if ref is not None:
            # The header still names the trace; the response's calls are what results answer.
            trace_id = header or ref.trace_id
            return Placement(trace_id, parsed.items, ref, state)
    match = await _longest(deps, boundaries) if boundaries else None
    if header is not None:
        if match is not None and match[1].trace_id == header:
            return Placement(header, parsed.items[match[0].position :], match[1], state)
        # The history does not extend a recorded step: compare it with the trace's last one,
        # so a rewritten or dropped assistant turn is still checked against what was emitted.
        return Placement(header, parsed.items, await _last_of(deps, header), state)
    if match is not None:
        boundary, ref = match
        return Placement(ref.trace_id, parsed.items[boundary.position :], ref, state)
    return Placement(ids.new_trace_id(), parsed.items, None, state)


async def _longest(deps: Deps, boundaries: list[Boundary]) -> tuple[Boundary, StepRef] | None:
    found = deps.recent.longest(boundaries)
    if found is not None:
        return found
    # Only keys the store may hold are looked up: in a gateway that is its store's only
    # writer, a history that continues nothing recorded costs no round trip.
    keys = [b.key for b in boundaries if deps.known_keys.may_hold(b.key)]
    if not keys:
        return None
    row = await _lookup(queries.find_continuation, deps, keys)
    if row is None:
        return None
    trace_id, step_id, key = row
    boundary = next(b for b in boundaries if b.key == key)
    return boundary, await _with_outputs(deps, trace_id, step_id)


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
