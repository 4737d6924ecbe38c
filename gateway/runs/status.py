"""How a trace ended: its status, derived from a summary folded over all its steps and
refusals (in any order), plus the split a store needs to filter on it by index. Pure.

`derive(summary, now, idle_seconds)`, first matching row wins ("last step" is the model
step that started last; passthrough steps only count as activity; "idle" is
`now - last_activity_at >= idle_seconds`):

| # | condition                                                        | status            |
|---|------------------------------------------------------------------|-------------------|
| 1 | a refusal at or after the last step's start, by a budget          | `budget_exceeded` |
| 2 | a refusal at or after the last step's start, by pairing or a loop | `refused`         |
| 3 | last step stopped `error`, `interrupted`, `cancelled`, `length`   | `failed`          |
|   | or `content_filter`                                              |                   |
| 4 | last step stopped `completed` or `refusal`, no tool call open     | `completed`       |
| 5 | not idle                                                         | `running`         |
| 6 | idle, tool calls open or last step stopped `paused` (the agent    | `abandoned`       |
|   | died mid-loop: the results or the paused turn never came back)   |                   |
| 7 | idle, nothing open (a `tool_calls` or `unknown` stop, no steps)   | `completed`       |

A `paused` last step (the provider stopped mid-turn and expects the turn sent back) waits
on the client like open tool calls do: `running` within the idle window, then `abandoned`,
never `completed`.

A step whose only open tool calls are terminal output tools (`final_answer`, `final_result`,
setting `terminal_tools`; `mark_terminal`) gave the run's answer through them: it folds as a
`completed` stop with nothing open, so row 4 ends the run; those calls need no result.

Rows 1-4 hold whatever the time ("final"); rows 5-7 depend on it. A refusal is compared
with the last step's start, not its end: a request refused while a step was still
streaming came after that step's admission, so nothing was admitted after the refusal.

Recommended storage (one row per trace; the writer folds each step and refusal into the
summary columns and stores `settle(summary)` beside them):

    traces.last_step_started_at, last_stop_reason (exists), open_calls,
    last_refusal_at, last_refusal_kind       -- the summary, so a late write folds right
    traces.status       -- settle().status: completed|failed|refused|budget_exceeded|abandoned
    traces.status_final -- settle().final: the status holds whatever the time
    traces.updated_at   -- last activity (exists)

Reading, with `cut = now - trace_idle_seconds` (the SQL twin of `status_at`):

    CASE WHEN status_final THEN status WHEN updated_at > :cut THEN 'running' ELSE status END

    running          NOT status_final AND updated_at > :cut     ix_traces_updated: a range
                                                                 over the idle window only
    abandoned        status = 'abandoned' AND updated_at <= :cut  ix_traces_status_updated
    completed        status = 'completed' AND (status_final OR updated_at <= :cut)  same
    failed, refused, status = :status (always final)              same
    budget_exceeded

Both indexes exist today and serve the newest-first keyset order (`updated_at`, `id`).

The read side gets the status from the store; a trace read without one of the six (an older
store's `ok` or `error`, or none) is derived again here by `status_of` from its `Ending`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from gateway.items import Item, ItemKind, StopReason, provider_run

DEFAULT_IDLE_SECONDS = 300.0
# Tools an agent calls to hand over its final answer; `terminal_tools` adds more.
TERMINAL_TOOLS = frozenset({"final_answer", "final_result"})
TERMINAL = "terminal"  # the item attribute that marks such a call


class TraceStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    ABANDONED = "abandoned"
    FAILED = "failed"
    REFUSED = "refused"
    BUDGET_EXCEEDED = "budget_exceeded"


class RefusalKind(StrEnum):
    PAIRING = "pairing"
    BUDGET = "budget"  # steps, tokens, cost or time
    LOOP = "loop"


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What status needs of a trace; built by folding every step and refusal in.

    The folds keep the latest event by time, so applying them in any order (late writes,
    several replicas) gives the same summary.
    """

    last_step_started_at: datetime | None = None
    last_stop: StopReason | None = None
    open_calls: int = 0  # tool calls the last step emitted: no later step answered them
    last_refusal_at: datetime | None = None
    last_refusal: RefusalKind | None = None
    last_activity_at: datetime | None = None

    def with_step(
        self,
        *,
        started_at: datetime,
        ended_at: datetime,
        stop: StopReason,
        open_calls: int,
        model_step: bool = True,
    ) -> TraceSummary:
        activity = _latest(self.last_activity_at, ended_at)
        older = self.last_step_started_at is not None and started_at < self.last_step_started_at
        if not model_step or older:  # older: a step finishing late
            return replace(self, last_activity_at=activity)
        # Built directly, not by `replace`: this runs for every step on the event loop.
        return TraceSummary(
            last_step_started_at=started_at,
            last_stop=stop,
            open_calls=open_calls,
            last_refusal_at=self.last_refusal_at,
            last_refusal=self.last_refusal,
            last_activity_at=activity,
        )

    def with_refusal(self, kind: RefusalKind, at: datetime) -> TraceSummary:
        folded = replace(self, last_activity_at=_latest(self.last_activity_at, at))
        if self.last_refusal_at is not None and at < self.last_refusal_at:
            return folded
        return replace(folded, last_refusal_at=at, last_refusal=kind)


@dataclass(frozen=True, slots=True)
class StoredStatus:
    """The time-free part of a status: what it is once idle, and whether time matters."""

    status: TraceStatus  # never RUNNING
    final: bool


def settle(summary: TraceSummary) -> StoredStatus:
    """Rows 1-4 (final) or the status rows 6-7 give once the trace is idle."""
    refusal = _refusal_after_last_step(summary)
    if refusal is RefusalKind.BUDGET:
        return StoredStatus(TraceStatus.BUDGET_EXCEEDED, final=True)
    if refusal is not None:
        return StoredStatus(TraceStatus.REFUSED, final=True)
    if summary.last_stop is not None and summary.last_stop.fails_run:
        return StoredStatus(TraceStatus.FAILED, final=True)
    if summary.last_stop is not None and summary.last_stop.final and summary.open_calls == 0:
        return StoredStatus(TraceStatus.COMPLETED, final=True)
    if summary.open_calls > 0 or summary.last_stop is StopReason.PAUSED:
        return StoredStatus(TraceStatus.ABANDONED, final=False)
    return StoredStatus(TraceStatus.COMPLETED, final=False)


def status_at(
    stored: StoredStatus,
    last_activity_at: datetime | None,
    now: datetime,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
) -> TraceStatus:
    """Rows 5-7: a status that is not final is `running` until the trace has been idle."""
    if stored.final:
        return stored.status
    if last_activity_at is not None and now - last_activity_at < timedelta(seconds=idle_seconds):
        return TraceStatus.RUNNING
    return stored.status


def derive(
    summary: TraceSummary, now: datetime, idle_seconds: float = DEFAULT_IDLE_SECONDS
) -> TraceStatus:
    return status_at(settle(summary), summary.last_activity_at, now, idle_seconds)


@dataclass(frozen=True, slots=True)
class Ending:
    """A trace's ending as the read side holds it: the status its store gave (one of the
    six; `ok`, `error` or nothing from a store that predates them) and the facts of its
    last step and refusal to derive it again from."""

    stored: str | None
    last_stop: str | None
    last_step_end: datetime | None
    last_refusal_at: datetime | None
    last_step_start: datetime | None
    open_calls: bool | None  # None: unknown, then a tool_calls stop means open calls
    now: datetime
    idle_seconds: float = DEFAULT_IDLE_SECONDS

    def summary(self) -> TraceSummary:
        """The facts as a summary: a stored `error` is a failed last step; with no end
        known for the last step nothing counts as open; a refusal read back without its
        kind ends the run `refused`."""
        open_calls = self.open_calls
        if open_calls is None:
            open_calls = self.last_stop == StopReason.TOOL_CALLS
        stored_error = self.stored == "error"
        return TraceSummary(
            last_step_started_at=self.last_step_start,
            last_stop=StopReason.ERROR if stored_error else StopReason.of(self.last_stop),
            open_calls=int(open_calls and self.last_step_end is not None),
            last_refusal_at=self.last_refusal_at,
            last_refusal=None if self.last_refusal_at is None else RefusalKind.PAIRING,
            last_activity_at=self.last_step_end,
        )


def status_of(ending: Ending) -> TraceStatus:
    """The stored status when it is one of the six, else `derive` over the facts."""
    if ending.stored in _STORED:
        return TraceStatus(ending.stored)
    return derive(ending.summary(), ending.now, ending.idle_seconds)


_STORED = frozenset(TraceStatus)


def emitted_calls(output_items: Iterable[Item]) -> int:
    """A step's tool calls the agent is to answer: the first choice's, not cut off, not a
    terminal output tool's."""
    return sum(
        1
        for item in output_items
        if item.kind is ItemKind.TOOL_CALL
        and not item.attrs.get("choice")
        and not item.attrs.get("incomplete")
        and not item.attrs.get(TERMINAL)
        and not provider_run(item)
    )


def mark_terminal(output_items: Sequence[Item], extra: Collection[str] = ()) -> Sequence[Item]:
    """The step's output with each call of a terminal output tool marked `terminal`."""
    if not any(_is_terminal(item, extra) for item in output_items):
        return output_items
    return [
        item.with_changes(attrs={**item.attrs, TERMINAL: True})
        if _is_terminal(item, extra)
        else item
        for item in output_items
    ]


def _is_terminal(item: Item, extra: Collection[str]) -> bool:
    name = item.tool_name
    return (
        item.kind is ItemKind.TOOL_CALL
        and name is not None
        and (name in TERMINAL_TOOLS or name in extra)
    )


def folded_stop(stop: StopReason, output_items: Iterable[Item]) -> StopReason:
    """How a step's stop folds into its trace: calls of terminal output tools alone (none
    other open, none cut off) end the run as a final answer does."""
    items = list(output_items)
    answered = any(
        item.kind is ItemKind.TOOL_CALL
        and item.attrs.get(TERMINAL)
        and not item.attrs.get("choice")
        and not item.attrs.get("incomplete")
        for item in items
    )
    if answered and stop is StopReason.TOOL_CALLS and emitted_calls(items) == 0:
        return StopReason.COMPLETED
    return stop


def _refusal_after_last_step(summary: TraceSummary) -> RefusalKind | None:
    if summary.last_refusal is None or summary.last_refusal_at is None:
        return None
    started = summary.last_step_started_at
    if started is not None and summary.last_refusal_at < started:
        return None  # a later request was admitted: the refusal did not end the trace
    return summary.last_refusal


def _latest(current: datetime | None, new: datetime) -> datetime:
    return new if current is None or new > current else current
