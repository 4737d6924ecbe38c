"""One sentence on how a run ended and what went wrong where, from its status (how
gateway.runs.status ended it), its violations and refusals, and its last steps."""

from __future__ import annotations

from typing import Any

from gateway.runs.status import TraceStatus
from gateway.ui.mcp_server.condensed import error_text, results_by_call, short, step_numbers

ENDINGS = {
    TraceStatus.FAILED: "failed",
    TraceStatus.REFUSED: "was refused by the gateway",
    TraceStatus.BUDGET_EXCEEDED: "went over its budget",
    TraceStatus.ABANDONED: "was abandoned",
    TraceStatus.COMPLETED: "completed",
    TraceStatus.RUNNING: "is still running",
}
MAX_NAMED = 3  # violations named in the sentence


def explanation(trace: dict[str, Any]) -> str:
    steps = trace.get("steps", [])
    status = TraceStatus(trace["status"])
    last = steps[-1] if steps else None
    where = f" at step {last['seq']} of {trace['step_count']}" if last else " before any step"
    parts = [f"Run {trace['id']} {ENDINGS[status]}{where}"]
    if last is not None:
        parts.append(_last_step(last, status, results_by_call(trace)))
    refusals = trace.get("refusals", [])[-1:]
    parts += [_refusal(r) for r in refusals]
    problems = _violations(trace, {r["id"] for r in refusals})
    if problems:
        parts.append("violations: " + "; ".join(problems))
    elif status is not TraceStatus.RUNNING:
        parts.append("no violations recorded")
    said = ": ".join(parts[:2]) + "".join(f"; {part}" for part in parts[2:])
    return said.rstrip(".") + "."


def _last_step(step: dict[str, Any], status: TraceStatus, results: dict[str, Any]) -> str:
    said = f"the last step ({step['model'] or 'unknown model'}) stopped `{step['stop_reason']}`"
    if step["error"]:
        said += f" with HTTP {step['http_status']}: {error_text(step['error'])}"
    calls = [i for i in step["output_items"] if i["kind"] == "tool_call"]
    open_calls = [c for c in calls if (c.get("call_id") or "") not in results]
    failed = [c for c in calls if results.get(c.get("call_id") or "", {}).get("is_error")]
    if status is TraceStatus.ABANDONED and open_calls:
        named = ", ".join(f"{c['tool_name']} (call {c['call_id']})" for c in open_calls)
        said += f" and no result ever came back for {named}"
    for call in failed[:MAX_NAMED]:
        text = short(results[call["call_id"]]["text"] or "", 200)
        said += f"; tool {call['tool_name']} (call {call['call_id']}) returned an error: {text}"
    return said


def _refusal(refusal: dict[str, Any]) -> str:
    where = f" (call {refusal['call_id']})" if refusal.get("call_id") else ""
    detail = short(refusal["detail"]).rstrip(".")
    return f"the next request was refused: {refusal['kind']}{where}: {detail}"


def _violations(trace: dict[str, Any], named: set[str]) -> list[str]:
    """The last violations, but those a refusal already named."""
    seq = step_numbers(trace)
    said = []
    found = [v for v in trace.get("violations", []) if v["id"] not in named]
    for violation in found[-MAX_NAMED:]:
        at = seq.get(violation.get("step_id") or "")
        where = f" at step {at}" if at is not None else ""
        where += f" (call {violation['call_id']})" if violation.get("call_id") else ""
        source = " on the MCP side" if violation.get("source") == "mcp" else ""
        detail = short(violation["detail"] or "", 200).rstrip(".")
        said.append(f"{violation['kind']}{where}{source}: {detail}")
    more = len(found) - MAX_NAMED
    return said + ([f"and {more} more"] if more > 0 else [])
