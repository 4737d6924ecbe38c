"""Rows of the traces and sessions lists: status in words, cost, duration, a preview line.

The one reader of a listed trace's optional fields; each is derived or left out when absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from gateway.runs.status import Ending, status_of
from gateway.ui.views import status as statuses
from gateway.ui.views.fmt import as_time, duration, id_parts, money, one_line, parse_time
from gateway.ui.views.present import trace_href

PREVIEW_CHARS = 110


@dataclass(slots=True)
class TraceRow:
    id: str
    id_head: str
    id_tail: str
    href: str
    status: str
    label: str
    tone: str
    preview: str | None
    session: str | None
    models: list[str]
    steps: int
    tokens: int
    cost: str
    cost_note: str | None
    duration: str
    updated_at: str | None
    last_stop: str | None
    violation_kinds: dict[str, int] = field(default_factory=dict)
    violation_count: int = 0
    # A root with sub-agents: its whole tree's totals (read API `tree`), shown under it.
    tree: dict[str, Any] | None = None
    parent: str | None = None  # a sub-agent's parent run (listed with include_children)


def trace_row(trace: dict[str, Any], *, now: datetime, idle_seconds: float) -> TraceRow:
    """`trace` is a listed trace plus listing.trace_extras()."""
    started, updated = parse_time(trace.get("started_at")), parse_time(trace.get("updated_at"))
    ending = Ending(
        stored=trace.get("status"),
        last_stop=trace.get("last_stop_reason"),
        last_step_end=updated if trace.get("step_count") else None,
        last_refusal_at=_when(trace.get("last_refusal_at")),
        last_step_start=_when(trace.get("last_step_at")),
        open_calls=None,
        now=now,
        idle_seconds=idle_seconds,
    )
    status = status_of(ending).value
    total = trace.get("duration_ms")
    if not isinstance(total, int | float):
        total = (updated - started).total_seconds() * 1000 if started and updated else None
    head, tail = id_parts(trace["id"])
    cost = _number(trace.get("cost_usd"))
    return TraceRow(
        id=trace["id"],
        id_head=head,
        id_tail=tail,
        href=trace_href(trace["id"]),
        status=status,
        label=statuses.label(status),
        tone=statuses.tone(status),
        preview=one_line(trace.get("first_user_text"), PREVIEW_CHARS),
        session=trace.get("session_id"),
        models=list(trace.get("models") or []),
        steps=int(trace.get("step_count") or 0),
        tokens=int((trace.get("usage") or {}).get("total_tokens") or 0),
        cost=money(cost) if cost is not None else "—",
        cost_note=_cost_note(trace),
        duration=duration(total) if trace.get("step_count") else "—",
        updated_at=trace.get("updated_at"),
        last_stop=trace.get("last_stop_reason"),
        violation_kinds=dict(trace.get("violation_kinds") or {}),
        violation_count=int(trace.get("violation_count") or 0),
        tree=_tree(trace.get("tree")),
        parent=trace.get("parent_trace_id"),
    )


def _tree(tree: object) -> dict[str, Any] | None:
    """A tree worth showing (more runs than the root), its figures as the page writes them."""
    if not isinstance(tree, dict) or int(tree.get("traces") or 0) < 2:
        return None
    cost = _number(tree.get("cost"))
    total = _number(tree.get("duration"))
    tokens = int(tree.get("input_tokens") or 0) + int(tree.get("output_tokens") or 0)
    return {
        "runs": int(tree["traces"]),
        "steps": int(tree.get("steps") or 0),
        "tokens": tokens,
        "cost": money(cost) if cost is not None else "—",
        "duration": duration(total) if total is not None else "—",
    }


def _when(value: object) -> datetime | None:
    return parse_time(as_time(value))


def _cost_note(trace: dict[str, Any]) -> str | None:
    if "cost_usd" not in trace:
        return "cost not recorded"
    if trace.get("cost_usd") is None:
        return "no known price for its model"
    return "prices from config" if trace.get("cost_source") == "config" else None


@dataclass(slots=True)
class SessionRow:
    id: str
    href: str
    traces: int
    steps: int
    tokens: int
    cost: str
    violations: int
    started_at: str | None
    updated_at: str | None


def session_row(session: dict[str, Any]) -> SessionRow:
    cost = _number(session.get("cost_usd"))
    session_id = str(session.get("session_id") or session.get("id") or "")
    return SessionRow(
        id=session_id,
        href="/?" + _query({"session": session_id}),
        traces=int(session.get("trace_count") or 0),
        steps=int(session.get("step_count") or 0),
        tokens=int(session.get("total_tokens") or 0),
        cost=money(cost) if cost is not None else "—",
        violations=int(session.get("violation_count") or 0),
        started_at=as_time(session.get("started_at")),
        updated_at=as_time(session.get("updated_at") or session.get("last_activity")),
    )


def _query(params: dict[str, str]) -> str:
    return urlencode(params)


def _number(value: object) -> float | None:
    """Sums read straight off PostgreSQL may be Decimal."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    return float(value)
