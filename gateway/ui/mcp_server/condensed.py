"""A trace condensed for a model's context: per step the stop reason, text, tool calls with
their arguments and results cut short, violations, tokens and cost; the whole kept under a
size cap, dropping whole steps (the earliest first) and saying which."""

from __future__ import annotations

import json
from typing import Any

TEXT_CHARS = 400  # of a step's text, a call's arguments or its result
DEFAULT_MAX_CHARS = 12_000


def short(value: Any, limit: int = TEXT_CHARS) -> str:
    """A value as one line of at most `limit` characters, marked where cut."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(error: Any) -> str | None:
    """A step's recorded error: its message where it has one."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return short(error["message"])
    return None if error is None else short(error)


def results_by_call(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What each tool call got back: the result the model received (a later step's input or
    the provider's own output), else the MCP execution's."""
    found: dict[str, dict[str, Any]] = {}
    for execution in trace.get("tool_executions", []):
        if execution.get("call_id"):
            result = execution.get("result")
            found[execution["call_id"]] = {"text": result, "is_error": execution["is_error"]}
    for step in trace.get("steps", []):
        for item in step["input_items"] + step["output_items"]:
            if item["kind"] == "tool_result" and item.get("call_id"):
                found[item["call_id"]] = {"text": item["text"], "is_error": item["is_error"]}
    return found


def step_numbers(trace: dict[str, Any]) -> dict[str, int]:
    return {step["id"]: step["seq"] for step in trace.get("steps", [])}


def condensed_step(
    step: dict[str, Any], results: dict[str, dict[str, Any]], violations: list[dict[str, Any]]
) -> dict[str, Any]:
    usage = step["usage"]
    text = " ".join(
        item["text"] or "" for item in step["output_items"] if item["kind"] == "assistant_text"
    )
    calls = []
    for item in step["output_items"]:
        if item["kind"] != "tool_call":
            continue
        result = results.get(item.get("call_id") or "")
        calls.append(
            {
                "call_id": item["call_id"],
                "name": item["tool_name"],
                "arguments": short(item["arguments"] if item["arguments"] is not None else {}),
                "result": None if result is None else short(result["text"] or ""),
                "is_error": None if result is None else bool(result["is_error"]),
            }
        )
    return {
        "step": step["seq"],
        "model": step["model"],
        "stop_reason": step["stop_reason"],
        "http_status": step["http_status"],
        "error": error_text(step["error"]),
        "text": short(text) if text else None,
        "tool_calls": calls,
        "violations": violations,
        "tokens": {"input": usage["prompt_tokens"], "output": usage["completion_tokens"]},
        "cost_usd": step["cost_usd"],
    }


def step_text(step: dict[str, Any]) -> str:
    tokens = step["tokens"]
    head = f"Step {step['step']} · {step['model'] or '?'} · stop {step['stop_reason']}"
    head += f" · {tokens['input'] or 0} in / {tokens['output'] or 0} out tokens"
    if step["cost_usd"] is not None:
        head += f" · ${step['cost_usd']:.6f}"
    lines = [head]
    if step["error"]:
        lines.append(f"  error (HTTP {step['http_status']}): {step['error']}")
    if step["text"]:
        lines.append(f"  text: {step['text']}")
    for call in step["tool_calls"]:
        line = f"  call {call['call_id']} {call['name']}({call['arguments']})"
        if call["result"] is None:
            line += " → no result recorded"
        else:
            line += f" → {'ERROR ' if call['is_error'] else ''}{call['result']}"
        lines.append(line)
    for violation in step["violations"]:
        lines.append("  " + violation_text(violation))
    return "\n".join(lines)


def violation_text(violation: dict[str, Any]) -> str:
    where = f" (call {violation['call_id']})" if violation.get("call_id") else ""
    state = "refused" if violation.get("enforced") else "observed"
    return f"violation {violation['kind']}{where}, {state}: {short(violation['detail'] or '')}"


def fitted(
    header: str, steps: list[dict[str, Any]], max_chars: int, keep_first: bool
) -> tuple[str, list[dict[str, Any]], str | None]:
    """The header and as many whole steps as fit in `max_chars`: the first ones when
    `keep_first` (a `from_step` read), else the last ones; and a note naming those left out."""
    texts = [step_text(step) for step in steps]
    budget = max_chars - len(header) - 200  # room for the note
    kept: list[int] = []
    order = range(len(steps)) if keep_first else range(len(steps) - 1, -1, -1)
    for index in order:
        if budget - len(texts[index]) - 1 < 0 and kept:
            break
        budget -= len(texts[index]) + 1
        kept.append(index)
    kept.sort()
    note = None
    if len(kept) < len(steps):
        left = [steps[i]["step"] for i in range(len(steps)) if i not in set(kept)]
        note = (
            f"Cut to fit {max_chars} characters: steps {left[0]}-{left[-1]} left out; "
            f"call get_trace with from_step={left[0]} to read them."
        )
    body = "\n".join([header, *(texts[i] for i in kept), *([note] if note else [])])
    return body[:max_chars], [steps[i] for i in kept], note
