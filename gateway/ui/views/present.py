"""The trace page's view model from the read API's trace dict (DESIGN.md, Read API).

This is the one reader of the trace's optional fields (status, cost, timing, session, first
user text, refusals): each is used when present and derived or left out when not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from gateway.runs.status import DEFAULT_IDLE_SECONDS, Ending, status_of
from gateway.ui.views import header as head
from gateway.ui.views import status as statuses
from gateway.ui.views.fmt import duration, one_line, parse_time
from gateway.ui.views.items import ItemView, digest, error_text, item_view
from gateway.ui.views.links import CallRecord, link_calls, link_refused_results, mark_repeats
from gateway.ui.views.shapes import RefusalView, Row, StepView
from gateway.ui.views.timeline import (
    model_spans,
    offset,
    open_calls,
    origin_of,
    refusal_spans,
    tool_gap,
    tool_spans,
)

LAZY_AFTER = 40  # steps: longer traces load step bodies on demand
OPEN_UPTO = 6  # steps: shorter traces show every step opened
LISTED_VIOLATIONS = 20


@dataclass(slots=True)
class TraceView:
    trace: dict[str, Any]
    header: head.Header
    rows: list[Row]
    steps: dict[str, StepView]
    span_ms: float
    href: str
    lazy: bool
    open_rows: bool
    running: bool
    violations: list[dict[str, Any]] = field(default_factory=list)  # the first few, listed
    # MCP executions no tool call on the page holds, shown apart; the ids of all shown.
    loose_executions: list[dict[str, Any]] = field(default_factory=list)
    shown_executions: set[str] = field(default_factory=set)
    seqs: dict[str, int] = field(default_factory=dict)
    pages: dict[bool, str] = field(default_factory=dict)  # rendered pages, by auth enabled

    @property
    def may_go_unanswered(self) -> bool:
        """A call is drawn never answered, or may be once this running trace goes idle: the
        legend names that bar only then."""
        return self.running or any(
            span.kind == "unanswered" for row in self.rows for span in row.spans
        )


def step_anchor(step_id: str) -> str:
    return f"step-{step_id}"


def trace_href(trace_id: str) -> str:
    return f"/traces/{quote(trace_id, safe='')}"


def step_href(trace_id: str, step_id: str) -> str:
    return f"{trace_href(trace_id)}/steps/{quote(step_id, safe='')}"


def trace_view(
    trace: dict[str, Any],
    *,
    now: datetime,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
    lazy_after: int = LAZY_AFTER,
) -> TraceView:
    steps_json: list[dict[str, Any]] = trace.get("steps") or []
    lazy = len(steps_json) > lazy_after
    refusal_json = _refusals(trace)
    origin = origin_of(trace, [t for t, _ in refusal_json if t is not None])
    steps = _step_views(trace, steps_json, origin)
    _attach_children(trace, steps)
    calls = link_calls(steps, _linker(trace["id"], lazy))
    mark_repeats(steps)
    refusals = [_refusal_view(when, group, origin) for when, group in refusal_json]
    for refusal in refusals:
        link_refused_results(refusal.items or [], refusal.offset_ms, calls, _call_href(trace, lazy))
    _place_violations(trace, steps)
    pending = open_calls(calls)
    status, facts = _status(trace, steps, refusal_json, pending, now, idle_seconds)
    running = status == "running"
    ends = [s.end_ms for s in steps] + [r.offset_ms for r in refusals]
    end = max([*ends, 1.0])
    if running and origin is not None:
        end = max(end, offset(now, origin))
    _draw(steps, refusals, calls, end, running)
    rows: list[Row] = sorted([*steps, *refusals], key=lambda r: r.offset_ms)
    under_calls = {ex for step in steps for ex in step.executions}
    executions: list[dict[str, Any]] = trace.get("tool_executions") or []
    return TraceView(
        trace=trace,
        header=_header(trace, steps, status, facts),
        rows=rows,
        steps={s.id: s for s in steps},
        span_ms=end,
        href=trace_href(trace["id"]),
        lazy=lazy,
        open_rows=len(steps_json) <= OPEN_UPTO,
        running=running,
        violations=(trace.get("violations") or [])[:LISTED_VIOLATIONS],
        seqs={s.id: s.seq for s in steps},
        loose_executions=[ex for ex in executions if ex["id"] not in under_calls],
        shown_executions={str(ex["id"]) for ex in executions} | under_calls,
    )


def _call_href(trace: dict[str, Any], lazy: bool) -> Any:
    def href(target: ItemView) -> str:
        if not lazy or target.step_id is None:
            return f"#{target.anchor}"
        return f"{step_href(trace['id'], target.step_id)}#{target.anchor}"

    return href


def _linker(trace_id: str, lazy: bool) -> Any:
    def href(target: ItemView, where: StepView) -> str:
        if not lazy or target.step_id is None or target.step_id == where.id:
            return f"#{target.anchor}"
        return f"{step_href(trace_id, target.step_id)}#{target.anchor}"

    return href


def _attach_children(trace: dict[str, Any], steps: list[StepView]) -> None:
    """Each sub-agent run under the tool call that started it, linked."""
    by_call = {c["call_id"]: c for c in trace.get("children") or () if c.get("call_id")}
    if not by_call:
        return
    for step in steps:
        for item in step.outputs:
            child = by_call.get(item.call_id or "") if item.kind == "tool_call" else None
            if child is not None:
                item.child = {**child, "href": trace_href(child["id"])}


def _step_views(
    trace: dict[str, Any], steps_json: list[dict[str, Any]], origin: datetime | None
) -> list[StepView]:
    views: list[StepView] = []
    previous_end: float | None = None
    declared: dict[str, StepView] = {}  # tool set → the first step that declared it
    for step in steps_json:
        start = offset(parse_time(step.get("started_at")), origin)
        latency = step.get("latency_ms")
        end = start + (float(latency) if isinstance(latency, int | float) else 0.0)
        usage = step.get("usage") or {}
        view = StepView(
            id=step["id"],
            seq=step["seq"],
            anchor=step_anchor(step["id"]),
            step=step,
            offset_ms=start,
            end_ms=end,
            tool_ms=tool_gap(step, start, previous_end),
            cost_usd=step.get("cost_usd"),
            cost_source=step.get("cost_source"),
            tokens=int((usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)),
            digest_in=digest(step.get("input_items") or []),
            digest_out=digest(step.get("output_items") or []),
            error=error_text(step.get("error")),
            href=step_href(trace["id"], step["id"]),
        )
        for direction, target in (("input", view.inputs), ("output", view.outputs)):
            for position, item in enumerate(step.get(f"{direction}_items") or []):
                anchor = f"s{step['seq']}-{direction[:3]}-{position}"
                target.append(item_view(item, anchor, step["id"], usage))
        previous_end = end if previous_end is None else max(previous_end, end)
        if step.get("tool_set"):  # a run re-sends its tools: shown in full once
            first = declared.setdefault(step["tool_set"], view)
            view.same_tools_as = first if first is not view else None
        views.append(view)
    return views


def _refusals(trace: dict[str, Any]) -> list[tuple[datetime | None, list[dict[str, Any]]]]:
    """Refused requests, each with its violations (and items when the store keeps them):
    the trace's `refusals`, else its violations that have no step, grouped by time."""
    source = trace.get("refusals")
    if source is None:  # the MCP side's violations are no requests to the provider
        source = [
            v
            for v in trace.get("violations") or []
            if not v.get("step_id") and v.get("source") != "mcp"
        ]
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for entry in source:
        groups.setdefault(entry.get("created_at"), []).append(entry)
    return [(parse_time(when), group) for when, group in groups.items()]


def refusal_anchor(violation_id: str) -> str:
    return f"refusal-{violation_id}"


def _refusal_view(
    when: datetime | None, group: list[dict[str, Any]], origin: datetime | None
) -> RefusalView:
    kept = [entry["items"] for entry in group if isinstance(entry.get("items"), list)]
    first_id = str(group[0].get("id") or "")
    anchor = refusal_anchor(first_id)
    items = None
    if kept:
        items = [
            item_view(item, f"{anchor}-in-{position}", None, {})
            for position, item in enumerate(kept[0])
        ]
    return RefusalView(
        id=first_id,
        anchor=anchor,
        offset_ms=offset(when, origin),
        created_at=group[0].get("created_at"),
        violations=group,
        items=items,
        digest=digest(kept[0]) if kept else "",
    )


def _place_violations(trace: dict[str, Any], steps: list[StepView]) -> None:
    by_id = {step.id: step for step in steps}
    for violation in trace.get("violations") or []:
        owner = by_id.get(violation.get("step_id") or "")
        if owner is not None:
            owner.violations.append(violation)


def _status(
    trace: dict[str, Any],
    steps: list[StepView],
    refusals: list[tuple[datetime | None, list[dict[str, Any]]]],
    pending: list[CallRecord],
    now: datetime,
    idle_seconds: float,
) -> tuple[str, dict[str, Any]]:
    last = steps[-1] if steps else None
    last_end = None
    if last is not None:
        started = parse_time(last.step.get("started_at"))
        latency = last.step.get("latency_ms") or 0.0
        last_end = started if started is None else started + _ms(latency)
    enforced = [(when, g) for when, g in refusals if when and any(v.get("enforced") for v in g)]
    refused_at = max((when for when, _ in enforced), default=None)
    ending = Ending(
        stored=trace.get("status"),
        last_stop=last.step.get("stop_reason") if last else None,
        last_step_end=last_end,
        last_refusal_at=refused_at,
        last_step_start=parse_time(last.step.get("started_at")) if last else None,
        open_calls=bool(pending),
        now=now,
        idle_seconds=idle_seconds,
    )
    status = status_of(ending).value
    activity = max([t for t in (last_end, refused_at) if t is not None], default=None)
    error = (last.step.get("error") or {}) if last else {}
    facts = {
        "last_stop": ending.last_stop,
        "open_calls": len(pending),
        "idle": duration((now - activity).total_seconds() * 1000) if activity else None,
        "since": activity.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if activity else None,
        "refusal": enforced[-1][1][0] if enforced else None,
        "error": error.get("message") if isinstance(error, dict) else str(error),
    }
    return status, facts


def _ms(value: float) -> timedelta:
    return timedelta(milliseconds=float(value))


def _draw(
    steps: list[StepView],
    refusals: list[RefusalView],
    calls: list[CallRecord],
    end: float,
    running: bool,
) -> None:
    tools = tool_spans(calls, end, end, running)
    for step in steps:
        step.spans = model_spans(step, end) + tools.get(step.id, [])
    for refusal in refusals:
        refusal.spans = refusal_spans(refusal, end)


def _header(
    trace: dict[str, Any], steps: list[StepView], status: str, facts: dict[str, Any]
) -> head.Header:
    """Its Duration runs from the first request to the last response, as the store's does:
    neither a later refused request nor, on a running trace, the time since counts."""
    steps_json = [s.step for s in steps]
    total = trace.get("duration_ms")
    if not isinstance(total, int | float):
        total = max((s.end_ms for s in steps), default=0.0)
    model = trace.get("model_ms")
    if not isinstance(model, int | float):
        model = sum(s.end_ms - s.offset_ms for s in steps)
    tool = trace.get("tool_ms")
    if not isinstance(tool, int | float):
        tool = sum(s.tool_ms or 0.0 for s in steps)
    cost, note = head.cost_of(trace, steps_json)
    budget = trace.get("budget") or {}
    usage = trace.get("usage") or {}
    title = trace.get("first_user_text")
    if title is None:  # a store that kept no first user text: the first request's
        title = _first_user_text(trace, steps_json)
    return head.Header(
        status=status,
        label=statuses.label(status),
        tone=statuses.tone(status),
        ending=head.ending_sentence(status, facts),
        cost=cost,
        cost_note=note,
        duration=duration(total) if steps else "—",
        shares=head.time_shares(float(total), float(model), float(tool)) if steps else [],
        title=one_line(title, 200),
        session=trace.get("session_id"),
        step_budget=head.step_budget_bar(trace, steps_json, budget.get("max_steps")),
        token_budget=head.budget_bar(
            usage.get("total_tokens") or 0,
            budget.get("max_tokens"),
            head.refused_by(trace, "token_budget_exceeded"),
        ),
    )


def _first_user_text(trace: dict[str, Any], steps: list[dict[str, Any]]) -> str | None:
    """The first request's user text: its step's, or a refused request's before it."""
    first = parse_time(steps[0].get("started_at")) if steps else None
    refused = sorted(
        (
            (when, entry.get("items") or [])
            for when, group in _refusals(trace)
            for entry in group[:1]
            if when is not None and (first is None or when < first)
        ),
        key=lambda request: request[0],
    )
    requests = [items for _, items in refused]
    if steps:
        requests.append(steps[0].get("input_items") or [])
    for items in requests:
        for item in items:
            if item.get("kind") == "user" and item.get("text"):
                return str(item["text"])
    return None
