"""Declared tools stored once per distinct list: a run re-sends the same tools every step, so
a step keeps only the hash of its (redacted) list and the list lives in `tool_sets`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway import jsoncodec
from gateway.step import StepRecord
from gateway.store.models import TOOL_SETS
from gateway.store.write.rows import placeholder

# The hash of each tool list object met lately: the recorder's redactor hands every step of a
# run the same redacted list, so a run's steps hash it once. The entry holds the list, so
# its id cannot be reused while remembered.
_KNOWN_LISTS = 256
_known: dict[int, tuple[Sequence[Any], str]] = {}


def hash_of_list(tools: Sequence[Any]) -> str:
    """`tool_set_hash`, remembered for the same list object (never changed once built)."""
    known = _known.get(id(tools))
    if known is not None and known[0] is tools:
        return known[1]
    key = tool_set_hash(tools)
    if len(_known) >= _KNOWN_LISTS:
        _known.clear()
    _known[id(tools)] = (tools, key)
    return key


def tool_set_hash(tools: Sequence[Any]) -> str:
    """SHA-256 of the list's canonical JSON: the same tools in the same order, one row (a
    record's tuple and a parsed list hash alike)."""
    try:  # orjson's sorted compact form: the standard library's, ten times faster
        canonical = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS, default=jsoncodec.plain)
    except TypeError:  # what orjson refuses (a lone surrogate, a huge integer)
        text = json.dumps(
            tools,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            default=jsoncodec.plain,
        )
        canonical = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(canonical).hexdigest()


def store_tool_sets(conn: Connection, steps: Iterable[StepRecord]) -> dict[str, str]:
    """Insert each new distinct list (a known one is left alone); step id → its list's hash."""
    by_step: dict[str, str] = {}
    fresh: dict[str, Sequence[Any]] = {}
    for step in steps:
        if step.declared_tools is None:
            continue
        key = hash_of_list(step.declared_tools)
        by_step[step.id] = key
        fresh.setdefault(key, step.declared_tools)
    if fresh:
        mark, known = placeholder(conn), _KNOWN[conn.dialect.name]
        sql = f"INSERT INTO tool_sets (hash, tools) VALUES ({mark}, {mark}) {known}"
        # In hash order: replicas lock the rows they claim in one order.
        rows = [(key, jsoncodec.dumps_text(fresh[key])) for key in sorted(fresh)]
        conn.exec_driver_sql(sql, rows)
    return by_step


# A list stored already is left as it is. On PostgreSQL the writer also locks its row until
# commit (an update whose condition is false locks the row, changes nothing): retention's
# sweep skips a locked list, so it cannot delete one this batch's steps are about to name.
# SQLite has one writer at a time: nothing to claim.
_KNOWN = {
    "postgresql": "ON CONFLICT (hash) DO UPDATE SET tools = EXCLUDED.tools WHERE false",
    "sqlite": "ON CONFLICT DO NOTHING",
}


def read_tool_sets(conn: Connection, hashes: Iterable[str | None]) -> dict[str, list[Any]]:
    """hash → tool list, for the hashes given (None entries skipped)."""
    wanted = sorted({h for h in hashes if h})
    if not wanted:
        return {}
    query = sa.select(TOOL_SETS.c.hash, TOOL_SETS.c.tools).where(TOOL_SETS.c.hash.in_(wanted))
    return {row.hash: list(row.tools or []) for row in conn.execute(query)}
