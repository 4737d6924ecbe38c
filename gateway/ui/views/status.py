"""How a trace ended, in words and a tone: the six statuses, and older stores' ok/error mapped.

Stores that predate the six statuses say only ok, error or budget_exceeded; the last stop
reason, the last refusal and the idle time then tell the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.items import StopReason

STATUSES = ("running", "completed", "abandoned", "failed", "refused", "budget_exceeded")
LABELS = {
    "running": "running",
    "completed": "completed",
    "abandoned": "abandoned",
    "failed": "failed",
    "refused": "refused",
    "budget_exceeded": "over budget",
}
TONES = {
    "running": "live",
    "completed": "ok",
    "abandoned": "warn",
    "failed": "bad",
    "refused": "bad",
    "budget_exceeded": "bad",
}
IDLE_SECONDS = 300.0
# What each status may be stored as by a store that predates it; rows are derived again.
STORED_AS = {
    "running": ("running", "ok"),
    "completed": ("completed", "ok"),
    "abandoned": ("abandoned", "ok"),
    "failed": ("failed", "error", "ok"),
    "refused": ("refused", "ok", "error"),
    "budget_exceeded": ("budget_exceeded",),
}


@dataclass(frozen=True, slots=True)
class Ending:
    """Facts a status is derived from when the store gives only ok/error."""

    stored: str | None
    last_stop: str | None
    last_step_end: datetime | None
    last_refusal_at: datetime | None
    # A refusal after the last step began came after it: requests of a run are sequential,
    # and a step's end is measured after its client already has the answer.
    last_step_start: datetime | None
    open_calls: bool | None  # None: unknown, then a tool_calls stop means open calls
    now: datetime
    idle_seconds: float = IDLE_SECONDS


def status_of(ending: Ending) -> str:
    if ending.stored in STATUSES:
        return ending.stored
    refusal, step_end = ending.last_refusal_at, ending.last_step_end
    started = ending.last_step_start
    if refusal is not None and (started is None or refusal > started):
        return "refused"
    if ending.stored == "error" or _fails_run(ending.last_stop):
        return "failed"
    if step_end is None:
        return "completed"
    idle = (ending.now - step_end).total_seconds() >= ending.idle_seconds
    open_calls = ending.open_calls
    if open_calls is None:
        open_calls = ending.last_stop == "tool_calls"
    if open_calls:
        return "abandoned" if idle else "running"
    if ending.last_stop == "completed" or idle:
        return "completed"
    return "running"


def _fails_run(stop: str | None) -> bool:
    reason = StopReason.of(stop)
    return reason is not None and reason.fails_run


def label(status: str) -> str:
    return LABELS.get(status, status.replace("_", " "))


def tone(status: str) -> str:
    return TONES.get(status, "warn")
