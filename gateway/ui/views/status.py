"""How a trace's status reads: its words and tone. Which status a trace has is decided by
gateway.runs.status alone."""

from __future__ import annotations

# The order the traces list's status filter offers them.
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


def label(status: str) -> str:
    return LABELS.get(status, status.replace("_", " "))


def tone(status: str) -> str:
    return TONES.get(status, "warn")
