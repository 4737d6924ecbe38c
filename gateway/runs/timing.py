"""The run's time rule: the tool time before a step (its response end is on the record).

A step's tool time runs from the end of the trace's previous response to its request; a
retry has none (its wait was the client's back-off after the failed attempt).
"""

from __future__ import annotations

from datetime import datetime

from gateway.runs.status import RefusalKind
from gateway.step import RefusalRecord, StepRecord

PASSTHROUGH = "passthrough"  # the protocol of steps that only count as activity


def tool_ms(previous_end: datetime | None, record: StepRecord) -> float | None:
    """The agent's time before this step: None for a trace's first step and for a retry."""
    if previous_end is None:
        return None
    gap = (record.started_at - previous_end).total_seconds() * 1000.0
    return tool_gap_ms(gap, retry=record.retry_of is not None)


def tool_gap_ms(gap_ms: float | None, *, retry: bool) -> float | None:
    """The rule on a gap already measured (None: no response before this request)."""
    if gap_ms is None or retry:
        # Before a retry the agent waited out a back-off, not a tool: the tool time was
        # counted on the failed attempt (or there was none before a first request).
        return None
    return max(0.0, gap_ms)


def refusal_kind(record: RefusalRecord) -> RefusalKind:
    if record.budget_exceeded:
        return RefusalKind.BUDGET
    try:
        return RefusalKind(record.kind)
    except ValueError:
        return RefusalKind.PAIRING
