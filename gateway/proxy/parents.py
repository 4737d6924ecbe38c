"""A run's place in its tree, decided when a request is admitted (so tree budgets can use
it): the run's own when this process linked it, else for a run's first request its parent
by header, then by task text (gateway.continuation.lineage), looking a parent's own place up
in the store when this process does not know it, within a short timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from gateway import ids
from gateway.checks.budgets import client_key, key_fingerprint
from gateway.continuation.lineage import (
    CONTENT,
    HEADER,
    MIN_TASK_CHARS,
    PARENT_CALL_HEADER,
    PARENT_TRACE_HEADER,
    TRACEPARENT,
    RecentCall,
    first_user_turn,
)
from gateway.errors import BadRequest
from gateway.proxy.deps import Deps
from gateway.proxy.placement import Placement
from gateway.step import Lineage
from gateway.store.read import trees

log = logging.getLogger(__name__)

STORE_LOOKUP_SECONDS = 0.25
T = TypeVar("T")
_CALL_ID_CHARS = 256


def client_of(deps: Deps, headers: Mapping[str, str]) -> str | None:
    """The client's keyed fingerprint: runs of one client may be each other's sub-agents."""
    key = client_key(headers)
    return None if key is None else key_fingerprint(deps.secret, key)


def parent_header(headers: Mapping[str, str]) -> tuple[str, str | None] | None:
    """The parent run (and call) a request names; a 400 when the id cannot be one."""
    parent = headers.get(PARENT_TRACE_HEADER)
    if parent is None:
        return None
    if not ids.TRACE_ID_RE.match(parent):
        raise BadRequest(f"invalid {PARENT_TRACE_HEADER}", param=PARENT_TRACE_HEADER)
    call = headers.get(PARENT_CALL_HEADER)
    if call is not None and not 0 < len(call) <= _CALL_ID_CHARS:
        raise BadRequest(f"invalid {PARENT_CALL_HEADER}", param=PARENT_CALL_HEADER)
    return parent, call


async def lineage_of(
    deps: Deps, headers: Mapping[str, str], placement: Placement, client: str | None
) -> Lineage | None:
    """The run's place in its tree as far as it is known here (None: a root, as known)."""
    trace_id = placement.trace_id
    known = deps.lineages.of(trace_id)
    if known is not None:
        return known
    named = parent_header(headers)
    lineage = None
    if named is not None and named[0] != trace_id:
        parent = await _place_of(deps, named[0])
        lineage = parent.child(named[0], named[1], HEADER)
    elif placement.new:
        lineage = await _found(deps, headers.get("traceparent"), client, placement)
    if lineage is not None:
        deps.lineages.linked(trace_id, lineage)
        deps.sinks.subagent_linked(lineage.via or HEADER)
    return lineage


async def _found(
    deps: Deps, traceparent: str | None, client: str | None, placement: Placement
) -> Lineage | None:
    """A new run's parent: the call whose `execute_tool` span its traceparent names, else
    the one recent call of its client whose task its first user turn holds (seen here, or
    when none was, stored by another replica)."""
    span_id = ids.traceparent_span_id(traceparent)
    named = None if span_id is None else deps.lineages.by_span(span_id)
    if named is not None and named.trace_id != placement.trace_id:
        return named.lineage.child(named.trace_id, named.call_id, TRACEPARENT)
    text = first_user_turn(placement.items)
    found = deps.lineages.by_content(client, text)
    if found is None and len(text) >= MIN_TASK_CHARS and _shared_store(deps):
        since = deps.clock() - timedelta(seconds=deps.lineages.window_s)
        rows = await _looked_up(deps, trees.stored_calls, client, since) or []
        found = deps.lineages.by_content(client, text, deps.lineages.stored(client, rows))
    if isinstance(found, RecentCall):
        return found.lineage.child(found.trace_id, found.call_id, CONTENT)
    return None


def _shared_store(deps: Deps) -> bool:
    """Whether other processes may have recorded calls this one never saw: a sole SQLite
    writer saw every call the store holds in the window (but those before a restart)."""
    return deps.settings.workers > 1 or deps.engine.dialect.name != "sqlite"


async def _looked_up(deps: Deps, function: Callable[..., T], *args: Any) -> T | None:
    """A store read within STORE_LOOKUP_SECONDS; None when the store is slow or failing
    (the run is then linked as if the store held nothing)."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(function, deps.engine, *args), STORE_LOOKUP_SECONDS
        )
    except Exception as exc:
        log.warning("a sub-agent's store lookup failed: %r", exc)
        return None


async def _place_of(deps: Deps, trace_id: str) -> Lineage:
    """A parent's place: as linked here, else as stored, else a root (not stored yet)."""
    known = deps.lineages.of(trace_id)
    if known is not None:
        return known
    return await _looked_up(deps, trees.lineage_of, trace_id) or Lineage(trace_id)
