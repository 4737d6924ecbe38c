"""A trace page's header: how the run ended, what it cost, how long it took, where time went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.checks.budgets import counts_as_step
from gateway.ui.views import status as statuses
from gateway.ui.views.fmt import duration, money, one_line, percent


@dataclass(frozen=True, slots=True)
class Bar:
    used: int
    limit: int | None
    fraction: float  # 0..1 of the limit
    over: bool
    note: str | None = None  # what the budget left out of `used`


@dataclass(frozen=True, slots=True)
class Share:
    kind: str  # model | tool | other
    label: str
    ms: float
    fraction: float  # of the bar


@dataclass(slots=True)
class Header:
    status: str
    label: str
    tone: str
    ending: str
    cost: str
    cost_note: str | None
    duration: str
    shares: list[Share] = field(default_factory=list)
    title: str | None = None  # the first user text, one line
    session: str | None = None
    step_budget: Bar | None = None
    token_budget: Bar | None = None


def budget_bar(used: int, limit: int | None, spent: bool = False, note: str | None = None) -> Bar:
    """`over` (drawn red): past the limit, or the budget refused a request (`spent`); a run
    that used exactly its budget and stopped on its own is within it."""
    if not limit:
        return Bar(used, None, 0.0, False, note)
    return Bar(used, limit, min(used / limit, 1.0), used > limit or spent, note)


def step_budget_bar(trace: dict[str, Any], steps: list[dict[str, Any]], limit: int | None) -> Bar:
    """The steps the budget counted, as the ledger did: failed attempts were given back."""
    spent = refused_by(trace, "step_budget_exceeded")
    if not steps:
        return budget_bar(int(trace.get("step_count") or 0), limit, spent)
    failed = sum(1 for s in steps if not counts_as_step(s.get("http_status")))
    note = f"{failed} failed attempt{'s' if failed != 1 else ''} not counted" if failed else None
    return budget_bar(len(steps) - failed, limit, spent, note)


def refused_by(trace: dict[str, Any], kind: str) -> bool:
    return any(v.get("kind") == kind and v.get("enforced") for v in trace.get("violations") or [])


def cost_of(trace: dict[str, Any], steps: list[dict[str, Any]]) -> tuple[str, str | None]:
    """The trace's cost and a note on what it leaves out; a dash when nothing is priced."""
    priced = [s for s in steps if "cost_usd" in s]
    if "cost_usd" in trace:
        total = trace["cost_usd"]
    elif priced:
        known = [s["cost_usd"] for s in priced if isinstance(s["cost_usd"], int | float)]
        total = sum(known) if known else None
    else:
        return "—", "cost not recorded"
    unknown = sum(1 for s in steps if s.get("cost_source") == "unknown_model")
    notes = []
    if unknown:
        notes.append(f"{unknown} step{'s' if unknown > 1 else ''} of a model with no known price")
    sources = {s.get("cost_source") for s in steps} | {trace.get("cost_source")}
    if "config" in sources:
        notes.append("prices from config")
    value = float(total) if isinstance(total, int | float) else None
    if value is None and unknown:
        return "unknown", "; ".join(notes)
    return money(value), "; ".join(notes) or None


def time_shares(total_ms: float, model_ms: float, tool_ms: float) -> list[Share]:
    """Model and tool time as parts of the run; concurrent requests may sum past its length."""
    other = max(total_ms - model_ms - tool_ms, 0.0)
    whole = max(model_ms + tool_ms + other, 1.0)
    parts = [("model", "model", model_ms), ("tool", "tools and agent", tool_ms)]
    if other >= whole * 0.01:
        parts.append(("other", "other", other))
    return [
        Share(kind, f"{name} {duration(ms)} · {percent(ms, whole)}", ms, ms / whole)
        for kind, name, ms in parts
    ]


def ending_sentence(status: str, facts: dict[str, Any]) -> str:
    """One sentence on how the run ended, from what the presenter found."""
    stop = facts.get("last_stop")
    open_calls = facts.get("open_calls") or 0
    calls = f"{open_calls} tool call{'s' if open_calls != 1 else ''}"
    refusal = facts.get("refusal") or {}
    if status == "running":
        waiting = f"; {calls} awaiting results" if open_calls else ""
        return f"Running: last activity {facts.get('idle', '—')} ago{waiting}."
    if status == "completed":
        return f"Completed: the last step stopped {stop or 'unknown'}."
    if status == "abandoned":
        return f"Abandoned: {calls} never answered; idle since {facts.get('since', '—')} UTC."
    if status == "refused":
        rule = str(refusal.get("kind") or "a rule").replace("_", " ")
        call = f" (call {refusal['call_id']})" if refusal.get("call_id") else ""
        return f"Refused: the last request broke {rule}{call}."
    if status == "budget_exceeded":
        rule = str(refusal.get("kind") or "budget").replace("_exceeded", "").replace("_", " ")
        return f"Stopped by its {rule}: the next request was refused."
    if status == "failed":
        error = one_line(facts.get("error"), 140)
        return f"Failed: the last step stopped {stop or 'with an error'}" + (
            f": {error}" if error else "."
        )
    return f"{statuses.label(status).capitalize()}."
