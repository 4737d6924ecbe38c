"""MCP records (executions, other methods, tool lists, violations) as spool lines, and back.

A line is the tag `M`, then a JSON array: the record's kind and its fields by name, so a
field added later takes its default when an older line is replayed.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
from typing import Any

import orjson

from gateway import jsoncodec
from gateway.mcp.records import Execution, McpViolation, MethodCall, Record, ToolList

TAG = b"M"
_KINDS: dict[str, type[Any]] = {
    "execution": Execution,
    "method": MethodCall,
    "tools": ToolList,
    "violation": McpViolation,
}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in _KINDS.values()}
_TIMES = frozenset({"started_at", "seen_at", "created_at"})


def encode(record: Record) -> bytes:
    cls = type(record)
    row = [_KIND_OF[cls], {name: getattr(record, name) for name in _FIELDS[cls]}]
    try:
        return TAG + orjson.dumps(row) + b"\n"
    except TypeError:  # a lone surrogate or a non-string key in what a client sent
        return TAG + json.dumps(row, default=_iso, separators=(",", ":")).encode() + b"\n"


def _iso(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def decode(body: bytes) -> Record:
    """The record of a line's body (after its tag); ValueError when it is not one."""
    kind, values = jsoncodec.loads(body)
    cls = _KINDS.get(kind)
    if cls is None or not isinstance(values, dict):
        raise ValueError(f"spooled MCP record of unknown kind {kind!r}")
    known = {name: value for name, value in values.items() if name in _FIELDS[cls]}
    for name in _TIMES & known.keys():
        known[name] = datetime.fromisoformat(known[name])
    record: Record = cls(**known)
    return record
