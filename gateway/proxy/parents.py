"""A run's place in its tree, decided when a request is admitted (so tree budgets can use
it): the run's own when this process linked it, else for a run's first request its parent
by header, then by task text (gateway.continuation.lineage), looking a parent's own place up
in the store when this process does not know it, within a short timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from gateway import ids
from gateway.checks.budgets import client_key, key_fingerprint
from gateway.continuation.lineage import (
    CONTENT,
    HEADER,
    PARENT_CALL_HEADER,
    PARENT_TRACE_HEADER,
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
        found = deps.lineages.by_content(client, first_user_turn(placement.items))
        if isinstance(found, RecentCall):
            lineage = found.lineage.child(found.trace_id, found.call_id, CONTENT)
    if lineage is not None:
        deps.lineages.linked(trace_id, lineage)
        deps.sinks.subagent_linked(lineage.via or HEADER)
    return lineage


async def _place_of(deps: Deps, trace_id: str) -> Lineage:
    """A parent's place: as linked here, else as stored, else a root (not stored yet)."""
    known = deps.lineages.of(trace_id)
    if known is not None:
        return known
    try:
        stored = await asyncio.wait_for(
            asyncio.to_thread(trees.lineage_of, deps.engine, trace_id), STORE_LOOKUP_SECONDS
        )
    except Exception as exc:  # a slow or failing store: the parent counts as a root
        log.warning("looking up the parent run %s failed: %r", trace_id, exc)
        stored = None
    return stored or Lineage(trace_id)
