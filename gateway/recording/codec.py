"""Step and refusal records as one line of JSON each, and back: the spool's format.

A record is a JSON array in its dataclass's field order (compact, and one orjson call);
decoding rebuilds the same frozen records, so a replayed record is stored like a live one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.step import RefusalRecord, StepRecord

Record = StepRecord | RefusalRecord
_STEP, _REFUSAL = b"S", b"R"


def encode(record: Record) -> bytes:
    """One line: a type tag, the record, a newline (orjson never writes a raw newline)."""
    if isinstance(record, StepRecord):
        return _STEP + orjson.dumps(_step_row(record)) + b"\n"
    row = (
        record.trace_id,
        record.created_at,
        [_violation_row(v) for v in record.violations],
        record.budget_exceeded,
        record.budget_max_steps,
        record.budget_max_tokens,
        record.kind,
        [_item_row(i) for i in record.items],
        record.session_id,
    )
    return _REFUSAL + orjson.dumps(row) + b"\n"


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
                [_violation(v) for v in violations],
                exceeded,
                steps,
                tokens,
                kind,
                [_item(i) for i in items],
                session,
            )
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"spooled record is malformed: {exc!r}") from exc
    raise ValueError("spooled record has an unknown tag")


def continuation_key(line: bytes) -> str | None:
    """The continuation key of a spooled step, without rebuilding the record."""
    if line[:1] != _STEP:
        return None
    key = orjson.loads(line[1:])[20]
    return key if isinstance(key, str) else None


def _step_row(r: StepRecord) -> tuple[Any, ...]:
    u = r.usage
    usage = (
        u.prompt_tokens,
        u.completion_tokens,
        u.total_tokens,
        u.cached_tokens,
        u.reasoning_tokens,
        u.cache_creation_tokens,
    )
    return (
        r.id,
        r.trace_id,
        r.protocol,
        r.method,
        r.path,
        r.started_at,
        r.model,
        r.stream,
        r.http_status,
        r.stop_reason,
        r.raw_stop_reason,
        usage,
        r.provider_request_id,
        r.response_id,
        r.latency_ms,
        r.ttft_ms,
        [_item_row(i) for i in r.input_items],
        [_item_row(i) for i in r.output_items],
        r.error,
        [_violation_row(v) for v in r.violations],
        r.continuation_key,
        r.budget_max_steps,
        r.budget_max_tokens,
        r.cost_nano,
        r.cost_source,
        r.session_id,
        r.retry_of,
        r.declared_tools,
        r.params,
    )


def _step(row: list[Any]) -> StepRecord:
    (id_, trace, protocol, method, path, started, model, stream, status, stop, raw) = row[:11]
    (usage, request_id, response_id, latency, ttft, inputs, outputs, error) = row[11:19]
    violations, key, max_steps, max_tokens, cost_nano, cost_source, session = row[19:26]
    retry_of = row[26] if len(row) > 26 else None  # spooled by a release without it
    # Tools and parameters came later still: a line spooled before them has neither.
    tools, params = [*row[27:29], None, None][:2]
    return StepRecord(
        id=id_,
        trace_id=trace,
        protocol=protocol,
        method=method,
        path=path,
        started_at=datetime.fromisoformat(started),
        model=model,
        stream=stream,
        http_status=status,
        stop_reason=StopReason(stop),
        raw_stop_reason=raw,
        usage=Usage(*usage),
        provider_request_id=request_id,
        response_id=response_id,
        latency_ms=latency,
        ttft_ms=ttft,
        input_items=[_item(i) for i in inputs],
        output_items=[_item(i) for i in outputs],
        error=error,
        violations=[_violation(v) for v in violations],
        continuation_key=key,
        budget_max_steps=max_steps,
        budget_max_tokens=max_tokens,
        cost_nano=cost_nano,
        cost_source=cost_source,
        session_id=session,
        retry_of=retry_of,
        declared_tools=tools,
        params=params,
    )


def _item_row(i: Item) -> tuple[Any, ...]:
    return (i.kind, i.role, i.text, i.call_id, i.tool_name, i.arguments, i.is_error, i.attrs)


def _item(row: list[Any]) -> Item:
    kind, role, text, call_id, tool_name, arguments, is_error, attrs = row
    return Item(ItemKind(kind), role, text, call_id, tool_name, arguments, is_error, attrs)


def _violation_row(v: Violation) -> tuple[Any, ...]:
    return (v.kind, v.detail, v.call_id, v.enforced)


def _violation(row: list[Any]) -> Violation:
    kind, detail, call_id, enforced = row
    return Violation(ViolationKind(kind), detail, call_id, enforced)
