"""Step and refusal records as one line of JSON each, and back: the spool's format.

A step is a JSON array of its fields in `gateway.step.STEP_FIELDS` order (compact, and one
orjson call); decoding rebuilds the same frozen records, so a replayed record is stored
like a live one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from gateway.step import (
    STEP_FIELDS,
    RefusalRecord,
    StepRecord,
    item_of,
    item_row,
    violation_of,
    violation_row,
)

Record = StepRecord | RefusalRecord
_STEP, _REFUSAL = b"S", b"R"
_KEY_AT = next(i for i, f in enumerate(STEP_FIELDS) if f.name == "continuation_key")
# The oldest step line known ends with the session id (retry_of came after it).
_OLDEST = 1 + next(i for i, f in enumerate(STEP_FIELDS) if f.name == "session_id")


def encode(record: Record) -> bytes:
    """One line: a type tag, the record, a newline (orjson never writes a raw newline)."""
    if isinstance(record, StepRecord):
        row = [f.to_json(getattr(record, f.name)) for f in STEP_FIELDS]
        return _STEP + orjson.dumps(row) + b"\n"
    refusal = (
        record.trace_id,
        record.created_at,
        [violation_row(v) for v in record.violations],
        record.budget_exceeded,
        record.budget_max_steps,
        record.budget_max_tokens,
        record.kind,
        [item_row(i) for i in record.items],
        record.session_id,
    )
    return _REFUSAL + orjson.dumps(refusal) + b"\n"


def decode(line: bytes) -> Record:
    """The record of one line (newline optional); ValueError when it is not one."""
    tag, row = line[:1], orjson.loads(line[1:])
    try:
        if tag == _STEP:
            return _step(row)
        if tag == _REFUSAL:
            trace_id, created, violations, exceeded, steps, tokens, kind, items, session = row
            return RefusalRecord(
                trace_id,
                datetime.fromisoformat(created),
                tuple(violation_of(v) for v in violations),
                exceeded,
                steps,
                tokens,
                kind,
                tuple(item_of(i) for i in items),
                session,
            )
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"spooled record is malformed: {exc!r}") from exc
    raise ValueError("spooled record has an unknown tag")


def continuation_key(line: bytes) -> str | None:
    """The continuation key of a spooled step, without rebuilding the record."""
    if line[:1] != _STEP:
        return None
    key = orjson.loads(line[1:])[_KEY_AT]
    return key if isinstance(key, str) else None


def _step(row: list[Any]) -> StepRecord:
    """A step of a line; fields added after the line was spooled are None (the release
    that wrote it had none), fields after the last one known here are ignored."""
    if not isinstance(row, list) or len(row) < _OLDEST:
        raise ValueError("a spooled step is shorter than its oldest format")
    values: dict[str, Any] = {}
    for f, value in zip(STEP_FIELDS, row, strict=False):
        values[f.name] = None if value is None else f.from_json(value)
    return StepRecord(**values)
