"""How one batch moves a trace's run summary: its status fold (gateway.runs.status), tool
time (gateway.runs.timing), last response end, span and first user text. Pure: the stored row
in, column values out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gateway.items import Item, ItemKind, StopReason
from gateway.runs.status import RefusalKind, TraceSummary, emitted_calls, folded_stop, settle
from gateway.runs.timing import PASSTHROUGH, refusal_kind, tool_ms
from gateway.step import RefusalRecord, StepRecord

FIRST_TEXT_CHARS = 300


@dataclass(slots=True)
class Folded:
    """What a batch sets on its trace row, and each of its steps' tool time."""

    values: dict[str, Any]
    tool_ms: float = 0.0  # added to the trace's sum
    step_tool_ms: dict[str, float | None] = field(default_factory=dict)


def fold(
    row: Any, steps: list[StepRecord], refusals: list[RefusalRecord], first_batch: bool
) -> Folded:
    """Fold a batch's records into the summary stored in `row` (read under its row lock,
    its start and last activity already merged with the batch's).

    `first_batch`: the trace had no step before this batch, so its first step is here.
    """
    summary = _summary(row)
    ordered = sorted(steps, key=lambda s: (s.started_at, s.id))
    last_end: datetime | None = row.last_response_end
    folded = Folded(values={})
    for step in ordered:
        tool = tool_ms(last_end, step)
        folded.step_tool_ms[step.id] = tool
        folded.tool_ms += tool or 0.0
        end = step.ended_at
        last_end = end if last_end is None else max(last_end, end)
        summary = summary.with_step(
            started_at=step.started_at,
            ended_at=end,
            stop=folded_stop(step.stop_reason, step.output_items),
            open_calls=emitted_calls(step.output_items),
            model_step=step.protocol != PASSTHROUGH,
        )
    for refusal in refusals:
        summary = summary.with_refusal(refusal_kind(refusal), refusal.created_at)
    stored = settle(summary)
    folded.values = {
        "status": stored.status.value,
        "status_final": stored.final,
        "last_step_started_at": summary.last_step_started_at,
        "last_stop_reason": None if summary.last_stop is None else summary.last_stop.value,
        "open_calls": summary.open_calls,
        "last_refusal_at": summary.last_refusal_at,
        "last_refusal_kind": None if summary.last_refusal is None else summary.last_refusal.value,
        "last_response_end": last_end,
        "span_ms": span_ms(row.started_at, last_end or row.updated_at),
        "first_user_text": row.first_user_text
        if row.first_user_text is not None or not first_batch
        else _first_request_text(ordered, refusals),
    }
    return folded


def _first_request_text(ordered: list[StepRecord], refusals: list[RefusalRecord]) -> str | None:
    """The first user text of the batch's first request: a refused one keeps its items too,
    so a run whose first request was refused still shows what it was asked."""
    first = ordered[0] if ordered else None
    earlier = [r for r in refusals if first is None or r.created_at < first.started_at]
    for refusal in sorted(earlier, key=lambda r: r.created_at):
        text = first_user_text(refusal.items)
        if text is not None:
            return text
    return None if first is None else first_user_text(first.input_items)


def span_ms(started_at: datetime, ended_at: datetime) -> float:
    """Whole milliseconds, so runs of equal length tie exactly (and order by id)."""
    return float(round((ended_at - started_at) / timedelta(milliseconds=1)))


def first_user_text(items: Iterable[Item]) -> str | None:
    """The first user item's text on one line, cut to FIRST_TEXT_CHARS."""
    for item in items:
        if item.kind is ItemKind.USER and item.text:
            return " ".join(item.text.split())[:FIRST_TEXT_CHARS] or None
    return None


def is_unpriced(record: StepRecord) -> bool:
    """It reported usage but has no price: its cost is unknown, not zero."""
    return record.cost_nano is None and any(v is not None for v in record.usage.to_json().values())


def _summary(row: Any) -> TraceSummary:
    return TraceSummary(
        last_step_started_at=row.last_step_started_at,
        last_stop=_enum(StopReason, row.last_stop_reason),
        open_calls=int(row.open_calls or 0),
        last_refusal_at=row.last_refusal_at,
        last_refusal=_enum(RefusalKind, row.last_refusal_kind),
    )


def _enum(kind: Any, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        return None
