"""Which traces this process saw end `abandoned`, judged by gateway.runs.status (the one
status function every surface uses): a later step or a refusal changes the verdict.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from datetime import datetime

from gateway.runs.status import (
    TraceStatus,
    TraceSummary,
    derive,
    emitted_calls,
    folded_stop,
    settle,
)
from gateway.runs.timing import PASSTHROUGH, refusal_kind
from gateway.step import RefusalRecord, StepRecord


class AbandonWatch:
    """Summaries of the traces that may still end abandoned (bounded, oldest dropped)."""

    def __init__(self, idle_seconds: float, limit: int) -> None:
        self._idle = idle_seconds
        self._limit = limit
        self._summaries: OrderedDict[str, TraceSummary] = OrderedDict()

    def step(self, step: StepRecord) -> None:
        if step.protocol == PASSTHROUGH:
            return
        summary = self._summaries.pop(step.trace_id, TraceSummary()).with_step(
            started_at=step.started_at,
            ended_at=step.ended_at,
            stop=folded_stop(step.stop_reason, step.output_items),  # as the store folds it
            open_calls=emitted_calls(step.output_items),
        )
        self._keep(step.trace_id, summary)
        lineage = step.lineage
        if lineage is not None and lineage.parent_trace_id is not None:
            # A run waiting on a running sub-agent is not idle (as the store keeps it).
            for ancestor in {lineage.parent_trace_id, lineage.root_trace_id}:
                self._active(ancestor, step.ended_at)

    def refusal(self, refusal: RefusalRecord) -> None:
        summary = self._summaries.pop(refusal.trace_id, None)
        if summary is not None:  # a refusal alone never makes a trace abandoned
            self._keep(
                refusal.trace_id, summary.with_refusal(refusal_kind(refusal), refusal.created_at)
            )

    def abandoned(self, now: datetime) -> int:
        """How many watched traces are abandoned at `now`: each counted once, then dropped."""
        count = 0
        for trace_id, summary in list(self._summaries.items()):
            status = derive(summary, now, self._idle)
            if status is TraceStatus.RUNNING:
                break  # ordered by last activity: the rest are newer still
            del self._summaries[trace_id]
            count += status is TraceStatus.ABANDONED
        return count

    def _active(self, trace_id: str, at: datetime) -> None:
        waiting = self._summaries.pop(trace_id, None)
        if waiting is not None:
            latest = at if waiting.last_activity_at is None else max(at, waiting.last_activity_at)
            self._keep(trace_id, replace(waiting, last_activity_at=latest))

    def _keep(self, trace_id: str, summary: TraceSummary) -> None:
        if settle(summary).final:
            return  # over whatever the time: never abandoned
        self._summaries[trace_id] = summary
        if len(self._summaries) > self._limit:
            self._summaries.popitem(last=False)
