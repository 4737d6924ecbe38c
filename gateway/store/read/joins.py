"""The store's side of joining MCP calls recorded by another gateway process: the model tool
calls an execution may run (by call id, or by its arguments' key and the name rule), and the
tool results that delivered a call to the model. Indexed lookups; call off the event loop."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.items import ItemKind
from gateway.mcp.texts import names_match
from gateway.store.key_epochs import stored_epochs
from gateway.store.mcp_tables import MCP_EXECUTIONS
from gateway.store.models import ITEMS, STEPS
from gateway.store.read.queries import reading

CHUNK = 500  # ids in one IN (...)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What an execution waiting for its join knows of the model call it runs."""

    execution_id: str
    tool: str
    keys: frozenset[str]  # its arguments' keys (as sent, and as redacted)
    since: datetime  # the match window's start
    trace_id: str | None = None  # joined to this run already: the call is one of its
    call_id: str | None = None  # named by the client: only its run is missing


@dataclass(frozen=True, slots=True)
class Found:
    trace_id: str
    call_id: str


def model_calls(engine: Engine, wanted: list[Wanted]) -> dict[str, list[Found]]:
    """By execution id: the stored model calls it may run, not yet run by another execution
    (one named by call id is its call, run or not)."""
    found: dict[str, list[Found]] = {}
    with reading(engine) as conn:
        named = _by_call_id(conn, {w.call_id for w in wanted if w.call_id})
        by_key = _by_key(conn, {k for w in wanted if not w.call_id for k in w.keys})
    for want in wanted:
        if want.call_id:
            trace = named.get(want.call_id)
            found[want.execution_id] = [] if trace is None else [Found(trace, want.call_id)]
            continue
        calls = {
            Found(trace, call)
            for key in want.keys
            for trace, call, name, at in by_key.get(key, ())
            if at >= want.since
            and names_match(name, want.tool)
            and (want.trace_id is None or trace == want.trace_id)
        }
        found[want.execution_id] = sorted(calls, key=lambda f: f.call_id)
    return found


def _calls() -> sa.Select[tuple[str, str, str, datetime, str]]:
    return (
        sa.select(
            STEPS.c.trace_id,
            ITEMS.c.call_id,
            ITEMS.c.tool_name,
            STEPS.c.started_at,
            ITEMS.c.args_key,
        )
        .select_from(ITEMS.join(STEPS, STEPS.c.id == ITEMS.c.step_id))
        .where(ITEMS.c.direction == "output", ITEMS.c.kind == ItemKind.TOOL_CALL.value)
    )


def _by_call_id(conn: Connection, call_ids: set[str]) -> dict[str, str]:
    """The run of each named call."""
    runs: dict[str, str] = {}
    epochs = ITEMS.c.key_epoch.in_(stored_epochs(conn))
    for chunk in _chunks(call_ids):
        for row in conn.execute(_calls().where(epochs, ITEMS.c.call_id.in_(chunk))):
            runs.setdefault(row.call_id, row.trace_id)
    return runs


def _by_key(conn: Connection, keys: set[str]) -> dict[str, list[tuple[str, str, str, datetime]]]:
    """Calls by arguments key, those another execution already runs left out."""
    run = sa.select(MCP_EXECUTIONS.c.id).where(MCP_EXECUTIONS.c.call_id == ITEMS.c.call_id)
    calls: dict[str, list[tuple[str, str, str, datetime]]] = defaultdict(list)
    epochs = ITEMS.c.key_epoch.in_(stored_epochs(conn))
    for chunk in _chunks(keys):
        query = _calls().where(epochs, ITEMS.c.args_key.in_(chunk), ~run.exists())
        for row in conn.execute(query):
            calls[row.args_key].append((row.trace_id, row.call_id, row.tool_name, row.started_at))
    return calls


def tool_results(engine: Engine, call_ids: set[str]) -> dict[str, str]:
    """The text the model was given as each call's result (its first tool result)."""
    given: dict[str, str] = {}
    with reading(engine) as conn:
        epochs = ITEMS.c.key_epoch.in_(stored_epochs(conn))
        for chunk in _chunks(call_ids):
            query = sa.select(ITEMS.c.call_id, ITEMS.c.text).where(
                epochs,
                ITEMS.c.call_id.in_(chunk),
                ITEMS.c.direction == "input",
                ITEMS.c.kind == ItemKind.TOOL_RESULT.value,
            )
            for row in conn.execute(query):
                given.setdefault(row.call_id, row.text or "")
    return given


def _chunks(values: Iterable[str]) -> Iterable[list[str]]:
    ordered = sorted(values)
    for start in range(0, len(ordered), CHUNK):
        yield ordered[start : start + CHUNK]
