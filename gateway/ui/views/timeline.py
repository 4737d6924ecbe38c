"""Where a trace's time went: step offsets, the agent's time between steps, waterfall spans.

Spans are in milliseconds since the trace began; the page scales them with the SVG viewBox,
so a live page rescales every row by changing one number.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from gateway.runs.timing import tool_gap_ms
from gateway.ui.views.fmt import duration, parse_time
from gateway.ui.views.items import times
from gateway.ui.views.links import CallRecord
from gateway.ui.views.shapes import RefusalView, Span, StepView

MIN_WIDTH = 0.004  # of the whole span: the shortest bar still visible


def origin_of(trace: dict[str, Any], refusal_times: Iterable[datetime]) -> datetime | None:
    starts = [parse_time(step.get("started_at")) for step in trace.get("steps") or []]
    known = [s for s in starts if s is not None] + list(refusal_times)
    started = parse_time(trace.get("started_at"))
    if started is not None:
        known.append(started)
    return min(known) if known else None


def offset(when: datetime | None, origin: datetime | None) -> float:
    if when is None or origin is None:
        return 0.0
    return max((when - origin).total_seconds() * 1000, 0.0)


def tool_gap(step: dict[str, Any], start: float, previous_end: float | None) -> float | None:
    """The store's tool_ms when it has one; else the run's rule on the gap after the previous
    step's end."""
    if "tool_ms" in step:
        value = step["tool_ms"]
        return float(value) if isinstance(value, int | float) else None
    gap = None if previous_end is None else start - previous_end
    return tool_gap_ms(gap, retry=step.get("retry_of") is not None)


def placed(kind: str, start: float, width: float, title: str, span: float) -> Span:
    """A bar inside the row's view box (0 to `span`), at least MIN_WIDTH of it wide: one that
    would reach past the trace's end (a call the last step left unanswered) ends at it."""
    width = min(max(width, span * MIN_WIDTH), span)
    return Span(kind, max(0.0, min(start, span - width)), width, title)


def model_spans(step: StepView, span: float) -> list[Span]:
    """Waiting for the first chunk, then receiving; one span when TTFT is unknown."""
    latency = step.end_ms - step.offset_ms
    ttft = step.step.get("ttft_ms")
    label = f"model {duration(latency)}"
    if not isinstance(ttft, int | float) or ttft <= 0 or ttft >= latency:
        return [placed("stream", step.offset_ms, latency, label, span)]
    first = f"first chunk {duration(ttft)}"
    return [
        placed("wait", step.offset_ms, ttft, first, span),
        placed("stream", step.offset_ms + ttft, latency - ttft, label, span),
    ]


def tool_spans(
    calls: list[CallRecord], end_of_trace: float, span: float, running: bool
) -> dict[str, list[Span]]:
    """Per emitting step id: one span per distinct answer, from its end to that request. A
    call the provider ran has none: it ran inside the model's time, for no time the provider
    tells."""
    groups: dict[tuple[str, float, str], list[CallRecord]] = {}
    last = _last_emissions(calls)
    for record in calls:
        step = record.step
        if step is None or not record.owed or _superseded(record, last):
            continue
        if record.answered_by is not None:
            key = (step.id, record.answered_by.offset_ms, "tool")
        else:
            key = (step.id, end_of_trace, "open" if running else "unanswered")
        groups.setdefault(key, []).append(record)
    spans: dict[str, list[Span]] = {}
    for (step_id, end, kind), records in groups.items():
        start = records[0].holder.end_ms
        bar = placed(kind, start, end - start, _tool_title(records, kind), span)
        spans.setdefault(step_id, []).append(bar)
    return spans


def _last_emissions(calls: list[CallRecord]) -> dict[str | None, CallRecord]:
    return {record.view.call_id: record for record in calls}


def _superseded(record: CallRecord, last: dict[str | None, CallRecord]) -> bool:
    """An unanswered call emitted again later: the retry carries its span."""
    return record.result is None and last.get(record.view.call_id) is not record


def _tool_title(records: list[CallRecord], kind: str) -> str:
    names = Counter(r.view.tool_name or "?" for r in records)
    listed = ", ".join(times(name, n) for name, n in names.most_common(4))
    count = f"{len(records)} calls " if len(records) > 1 else ""
    answer = records[0].answered_by
    if kind == "tool" and answer is not None:
        wait = answer.offset_ms - records[0].holder.end_ms
        return f"{count}{listed} → step {answer.seq} after {duration(wait)}"
    return f"{count}{listed}: " + ("waiting for results" if kind == "open" else "never answered")


def refusal_spans(refusal: RefusalView, span: float) -> list[Span]:
    """A tick at the refusal; one at the very end of the trace is drawn just inside it."""
    return [placed("refusal", refusal.offset_ms, span * MIN_WIDTH * 2, "refused request", span)]


def open_calls(calls: list[CallRecord]) -> list[CallRecord]:
    """Emitted calls the agent owes a result for, none answered, not emitted again after."""
    last = _last_emissions(calls)
    return [
        r
        for r in calls
        if r.step is not None and r.owed and not r.result and not _superseded(r, last)
    ]
