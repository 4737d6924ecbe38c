"""When each trace's last model response ended in this process: the tool time a step's
record carries (the store derives its own, exact across replicas)."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from gateway.runs.timing import tool_gap_ms

OPEN_TRACES = 10_000  # traces whose last response end is kept, least recent evicted


class ResponseEnds:
    """Bounded memory of response ends, one per trace; the event loop's alone."""

    def __init__(self, limit: int = OPEN_TRACES) -> None:
        self._limit = limit
        self._ends: OrderedDict[str, datetime] = OrderedDict()

    def last(self, trace_id: str) -> datetime | None:
        """The trace's latest response end here (None: none seen, or forgotten)."""
        return self._ends.get(trace_id)

    def remember(self, trace_id: str, ended_at: datetime) -> None:
        """Keep the trace's latest response end, the trace now the most recent one."""
        ends = self._ends
        previous = ends.pop(trace_id, None)
        ends[trace_id] = ended_at if previous is None else max(previous, ended_at)
        if len(ends) > self._limit:
            ends.popitem(last=False)

    def tool_ms(
        self, trace_id: str, started_at: datetime, ended_at: datetime, *, retry: bool = False
    ) -> float | None:
        """Time from the trace's previous response end to this request by the run's rule
        (gateway.runs.timing: None for its first step here and for a retry), remembering
        the latest end (the step's end does the same in two, see gateway.exchange.closing)."""
        previous = self.last(trace_id)
        self.remember(trace_id, ended_at)
        gap = None if previous is None else (started_at - previous).total_seconds() * 1000
        return tool_gap_ms(gap, retry=retry)
