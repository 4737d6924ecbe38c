"""Places a request in a trace: runs `gateway.continuation.placement.decide` and makes the
store lookups it asks for, each within a short timeout, so a slow database never holds a
request back (it is then placed as if the store held nothing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.engine import Engine

from gateway import ids
from gateway.continuation.keys import StepRef, resolve_references
from gateway.continuation.placement import (
    ByConversation,
    ByResponse,
    Continuing,
    Found,
    Known,
    LastStep,
    NeedsLookup,
    OutputsOf,
    Placed,
    StoredRows,
    decide,
    trace_header,
)
from gateway.items import Item
from gateway.protocols.base import ParsedRequest
from gateway.proxy.deps import Deps
from gateway.store.read import queries

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
    new: bool = False  # no request before it named or continued the trace: a run's first


async def place(deps: Deps, header: str | None, parsed: ParsedRequest) -> Placement:
    header = trace_header(header)
    items, unresolved = resolve_references(parsed.items, deps.recent.output_items)
    if len(items) < LONG_HISTORY:
        scan = deps.keys.scan(items)
    else:  # hashing a very long history would hold the event loop
        scan = await asyncio.to_thread(deps.keys.scan, items)
    attempt = scan.attempt_key(parsed.model, parsed.stream)
    failed = deps.recent.take_failed(attempt)
    known = Known(
        header,
        parsed.previous_response_id,
        items,
        scan,
        attempt,
        failed,
        parsed.conversation_id,
    )
    found = Found()
    decided = decide(known, deps.recent, deps.known_keys.may_hold, found)
    while not isinstance(decided, Placed):
        await _look_up(deps, decided, found)
        decided = decide(known, deps.recent, deps.known_keys.may_hold, found)
    if decided.claim is not None:
        deps.recent.claim(decided.claim, attempt)
    trace_id = ids.new_trace_id() if decided.trace_id is None else decided.trace_id
    return Placement(
        trace_id,
        items[decided.start :],
        decided.previous,
        scan.state,
        items,
        unresolved,
        attempt,
        decided.retry_of,
        new=decided.trace_id is None,
    )


async def _look_up(deps: Deps, lookup: NeedsLookup, found: Found) -> None:
    """Make one lookup the decision asked for and note its answer (None if it failed)."""
    match lookup:
        case ByResponse(response_id):
            found.responses[lookup] = await _lookup(queries.find_by_response_id, deps, response_id)
        case ByConversation(conversation_id):
            found.conversations[lookup] = await _lookup(
                queries.find_by_conversation, deps, conversation_id
            )
        case OutputsOf(step_id):
            outputs = await _lookup(queries.step_output_items, deps, step_id)
            found.outputs[lookup] = None if outputs is None else tuple(outputs)
        case Continuing():
            found.continuations[lookup] = await _lookup(_stored_continuation, deps, lookup)
        case LastStep(trace_id):
            row = await _lookup(queries.last_step, deps, trace_id)
            found.last_steps[lookup] = None if row is None else (row[0], tuple(row[1]))


def _stored_continuation(engine: Engine, lookup: Continuing) -> StoredRows | None:
    """Both store lookups in one trip off the event loop; the emitters only when no key
    names a step."""
    row = queries.find_continuation(engine, list(lookup.keys))
    if row is not None:
        return StoredRows(row)
    if not lookup.call_ids:
        return None
    return StoredRows(None, tuple(queries.call_emitters(engine, list(lookup.call_ids))))


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
