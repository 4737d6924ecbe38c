"""Each tool's answer, read through the read API's own queries: a text for the model and the
same facts as structured content. Blocking (the store): call in a thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from gateway.store.read import queries
from gateway.store.read.filters import TraceFilters
from gateway.ui import mcp_api
from gateway.ui.mcp_server import condensed
from gateway.ui.mcp_server.explain import explanation

MAX_STEPS_READ = 500  # the last steps of a run one answer reads at most


class NoSuchTrace(LookupError):
    """The trace named does not exist (or the store holds no run at all)."""


@dataclass(frozen=True, slots=True)
class Reader:
    """What the tools read: the store, the idle window that ends a run, the clock."""

    engine: Engine
    idle_seconds: float
    search_timeout: float
    clock: Callable[[], datetime]


Answer = tuple[str, dict[str, Any]]


def list_traces(reader: Reader, args: dict[str, Any]) -> Answer:
    filters = TraceFilters(
        status=args.get("status"),
        violation=args.get("violation"),
        model=args.get("model"),
        since=args.get("since"),
        until=args.get("until"),
        q=args.get("search"),
        include_children=args.get("include_children"),
    )
    return _listed(reader, filters, args["limit"])


def search(reader: Reader, args: dict[str, Any]) -> Answer:
    """The runs found, and first, when the query is a step, response or provider request id,
    the step it names."""
    text, found = _listed(reader, TraceFilters(q=args["query"]), args["limit"])
    step = queries.find_step(reader.engine, args["query"].strip())
    if step is None:
        return text, found | {"step": None}
    named = f"{args['query'].strip()} is step {step['seq']} of run {step['trace_id']}."
    return f"{named}\n{text}", found | {"step": step}


def _listed(reader: Reader, filters: TraceFilters, limit: int) -> Answer:
    page = queries.list_traces(
        reader.engine,
        limit=limit,
        filters=filters,
        now=reader.clock(),
        idle_seconds=reader.idle_seconds,
        search_timeout=reader.search_timeout,
    )
    traces = [_listed_trace(trace) for trace in page["traces"]]
    lines = [_trace_line(trace) for trace in traces] or ["No runs match."]
    return "\n".join(lines), {"traces": traces}


def _listed_trace(trace: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "status", "step_count", "models", "cost_usd", "violation_count")
    return {key: trace[key] for key in keep} | {
        "updated_at": trace["updated_at"],
        "parent_trace_id": trace.get("parent_trace_id"),
        "first_user_text": condensed.short(trace["first_user_text"] or "", 160),
    }


def _trace_line(trace: dict[str, Any]) -> str:
    cost = "" if trace["cost_usd"] is None else f", ${trace['cost_usd']:.4f}"
    return (
        f"{trace['id']}: {trace['status']}, {trace['step_count']} steps, "
        f"{', '.join(trace['models']) or 'no model'}{cost}, "
        f"{trace['violation_count']} violations, last active {trace['updated_at']}: "
        f"{trace['first_user_text']!r}"
    )


def get_trace(reader: Reader, args: dict[str, Any]) -> Answer:
    from_step = args.get("from_step")
    trace = _trace(reader, args["trace_id"], from_step)
    results = condensed.results_by_call(trace)
    by_step: dict[int, list[dict[str, Any]]] = {}
    seq = condensed.step_numbers(trace)
    for violation in trace["violations"]:  # 0: of no step (a refused request)
        at = 0 if violation["step_id"] is None else seq.get(violation["step_id"])
        if at is not None:  # else of a step before `from_step`
            by_step.setdefault(at, []).append(_violation(violation))
    steps = [
        condensed.condensed_step(step, results, by_step.get(step["seq"], []))
        for step in trace["steps"]
    ]
    header = _header(trace, by_step.get(0, []))
    max_chars = args.get("max_chars", condensed.DEFAULT_MAX_CHARS)
    text, kept, note = condensed.fitted(header, steps, max_chars, from_step is not None)
    summary = {key: trace[key] for key in ("id", "status", "step_count", "cost_usd", "usage")}
    structured = {"trace": summary, "steps": kept, "violations": by_step.get(0, []), "note": note}
    return text, structured


def _header(trace: dict[str, Any], unplaced: list[dict[str, Any]]) -> str:
    usage, cost = trace["usage"], trace["cost_usd"]
    lines = [
        f"Run {trace['id']}: {trace['status']}, {trace['step_count']} steps, "
        f"{usage['prompt_tokens'] or 0} in / {usage['completion_tokens'] or 0} out tokens, "
        f"cost {'unknown' if cost is None else f'${cost:.6f}'}",
        f"Task: {condensed.short(trace['first_user_text'] or '', 300)!r}",
    ]
    if trace.get("parent"):
        lines.append(f"Sub-agent of run {trace['parent']['id']}")
    children = [f"{c['id']} ({c['status']}, call {c['call_id']})" for c in trace["children"]]
    if children:
        lines.append(f"Sub-agent runs: {', '.join(children)}")
    lines += [condensed.violation_text(v) for v in unplaced]
    return "\n".join(lines)


def _violation(violation: dict[str, Any]) -> dict[str, Any]:
    keep = ("kind", "call_id", "detail", "enforced")
    return {key: violation.get(key) for key in keep} | {"source": violation.get("source")}


def list_violations(reader: Reader, args: dict[str, Any]) -> Answer:
    page = queries.list_violations(
        reader.engine, limit=args["limit"], kind=args.get("kind"), trace_id=args.get("trace_id")
    )
    found = [_violation(v) | {"trace_id": v["trace_id"]} for v in page["violations"]]
    lines = [f"{v['trace_id']}: {condensed.violation_text(v)}" for v in found]
    return "\n".join(lines) or "No violations recorded.", {"violations": found}


def explain_run(reader: Reader, args: dict[str, Any]) -> Answer:
    trace_id = args.get("trace_id") or _latest(reader)
    trace = _trace(reader, trace_id, None)
    text = explanation(trace)
    return text, {"trace_id": trace["id"], "status": trace["status"], "explanation": text}


def _latest(reader: Reader) -> str:
    newest = queries.list_traces(
        reader.engine, limit=1, now=reader.clock(), idle_seconds=reader.idle_seconds
    )["traces"]
    if not newest:
        raise NoSuchTrace("the store holds no run yet")
    return str(newest[0]["id"])


def _trace(reader: Reader, trace_id: str, from_step: int | None) -> dict[str, Any]:
    summary = queries.get_trace_summary(reader.engine, trace_id)
    if summary is None:
        raise NoSuchTrace(f"no trace {trace_id}")
    after = from_step - 1 if from_step else max(0, summary["step_count"] - MAX_STEPS_READ)
    trace = queries.get_trace(
        reader.engine,
        trace_id,
        reader.clock(),
        reader.idle_seconds,
        steps_after=after,
        steps_limit=MAX_STEPS_READ,
    )
    if trace is None:
        raise NoSuchTrace(f"no trace {trace_id}")
    return mcp_api.add_executions(reader.engine, trace)


TOOLS: dict[str, Callable[[Reader, dict[str, Any]], Answer]] = {
    "list_traces": list_traces,
    "get_trace": get_trace,
    "search": search,
    "list_violations": list_violations,
    "explain_run": explain_run,
}
