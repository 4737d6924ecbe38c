"""Step, refusal and MCP records as one line of JSON each, and back: the spool's format.

A record is a JSON array of its fields in the order `gateway.step` declares them (compact,
and one orjson call); decoding rebuilds the same frozen records, so a replayed record is
stored like a live one.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
from enum import Enum
from operator import attrgetter
from typing import Any

import orjson

from gateway import jsoncodec
from gateway.jsoncodec import plain
from gateway.mcp import records as mcp
from gateway.recording import mcp_codec
from gateway.step import (
    REFUSAL_FIELDS,
    STEP_FIELDS,
    Persisted,
    RefusalRecord,
    StepRecord,
    plain_value,
)

Record = StepRecord | RefusalRecord | mcp.Record
_STEP, _REFUSAL = b"S", b"R"
_KEY_AT = next(i for i, f in enumerate(STEP_FIELDS) if f.name == "continuation_key")
# The oldest step line known ends with the session id (retry_of came after it).
_OLDEST = 1 + next(i for i, f in enumerate(STEP_FIELDS) if f.name == "session_id")
# The oldest refusal line known ends with the session id too (its lineage came after it).
_OLDEST_REFUSAL = 1 + next(i for i, f in enumerate(REFUSAL_FIELDS) if f.name == "session_id")


class _Row:
    """A record's fields in a table's order, read at once; only the few fields with a JSON
    form of their own (usage, items, violations) are converted."""

    _AS_IS = next(f.default for f in fields(Persisted) if f.name == "to_json")

    def __init__(self, table: tuple[Persisted, ...]) -> None:
        self._values = attrgetter(*(f.name for f in table))
        self._convert = tuple(
            (at, f.to_json) for at, f in enumerate(table) if f.to_json is not self._AS_IS
        )

    def __call__(self, record: Any) -> list[Any]:
        row = list(self._values(record))
        for at, to_json in self._convert:
            row[at] = to_json(row[at])
        return row


_STEP_ROW, _REFUSAL_ROW = _Row(STEP_FIELDS), _Row(REFUSAL_FIELDS)


def encode(record: Record) -> bytes:
    """One line: a type tag, the record, a newline (neither writer writes a raw newline)."""
    if isinstance(record, StepRecord):
        return _STEP + _dumps(_STEP_ROW(record)) + b"\n"
    if isinstance(record, RefusalRecord):
        return _REFUSAL + _dumps(_REFUSAL_ROW(record)) + b"\n"
    return mcp_codec.encode(record)


def _dumps(row: list[Any]) -> bytes:
    try:
        return orjson.dumps(row, default=plain)
    except TypeError:  # what a client may send: an integer past 64 bits, nesting past 255
        return json.dumps(row, default=_as_orjson_does, separators=(",", ":")).encode()


def _as_orjson_does(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return plain(value)


def decode(line: bytes) -> Record:
    """The record of one line (newline optional); ValueError when it is not one."""
    tag = line[:1]
    try:
        if tag == mcp_codec.TAG:
            return mcp_codec.decode(line[1:])
        row = jsoncodec.loads(line[1:])  # a fallback line may hold NaN
        if tag == _STEP:
            return StepRecord(**_values(row, STEP_FIELDS, _OLDEST))
        if tag == _REFUSAL:
            return RefusalRecord(**_values(row, REFUSAL_FIELDS, _OLDEST_REFUSAL))
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"spooled record is malformed: {exc!r}") from exc
    raise ValueError("spooled record has an unknown tag")


def continuation_key(line: bytes) -> str | None:
    """The continuation key of a spooled step, without rebuilding the record."""
    if line[:1] != _STEP:
        return None
    key = jsoncodec.loads(line[1:])[_KEY_AT]
    return key if isinstance(key, str) else None


def _decoders(table: tuple[Persisted, ...]) -> tuple[tuple[str, ...], tuple[tuple[int, Any], ...]]:
    """A table's field names, and the fields whose JSON form needs a conversion."""
    names = tuple(f.name for f in table)
    return names, tuple(
        (i, f.from_json) for i, f in enumerate(table) if f.from_json is not plain_value
    )


_DECODERS = {id(STEP_FIELDS): _decoders(STEP_FIELDS), id(REFUSAL_FIELDS): _decoders(REFUSAL_FIELDS)}


def _values(row: list[Any], table: tuple[Persisted, ...], oldest: int) -> dict[str, Any]:
    """A record's fields of a line; fields added after the line was spooled take their
    defaults (the release that wrote it had none), fields after the last one known here are
    ignored (a newer release wrote it)."""
    if not isinstance(row, list) or len(row) < oldest:
        raise ValueError("a spooled record is shorter than its oldest format")
    names, converted = _DECODERS[id(table)]
    if len(row) > len(names):
        del row[len(names) :]
    for index, from_json in converted:  # most fields are kept as parsed
        if index < len(row) and row[index] is not None:
            row[index] = from_json(row[index])
    return dict(zip(names, row, strict=False))
