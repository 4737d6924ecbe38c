"""View models for the trace page: waterfall geometry, token bars, typed items, call↔result links.

Input is the read API's trace dict (DESIGN.md, Read API); output is plain data for templates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.ui.fmt import duration, parse_time

SCALE = 1000.0  # SVG user units across a bar's full width
PREVIEW_CHARS = 600
PREVIEW_LINES = 12
KIND_LABELS = {
    "instruction": "instruction",
    "user": "user",
    "assistant_text": "assistant",
    "tool_call": "tool call",
    "tool_result": "tool result",
    "reasoning": "reasoning",
    "refusal": "refusal",
    "other": "other",
}


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str  # CSS class: prompt, cached, completion, reasoning, wait, stream
    x: float
    width: float
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Bar:
    used: int
    limit: int | None
    fraction: float  # 0..1 of the limit, for the SVG
    over: bool


@dataclass(slots=True)
class ItemView:
    anchor: str
    kind: str
    label: str
    role: str | None = None
    text: str | None = None
    preview: str | None = None  # set when `text` is long: shown collapsed first
    tool_name: str | None = None
    call_id: str | None = None
    arguments: str | None = None
    arguments_valid: bool = True
    link: str | None = None  # "#anchor" of the partner call or result
    is_error: bool = False
    tokens: int | None = None  # reasoning tokens
    truncated_from: int | None = None
    incomplete: bool = False


@dataclass(slots=True)
class StepView:
    id: str
    seq: int
    anchor: str
    step: dict[str, Any]
    offset_ms: float
    timing: list[Segment]
    tokens: list[Segment]
    token_total: int
    error_text: str | None = None
    inputs: list[ItemView] = field(default_factory=list)
    outputs: list[ItemView] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class TraceView:
    trace: dict[str, Any]
    steps: list[StepView]
    span_ms: float
    step_budget: Bar
    token_budget: Bar
    unplaced: list[dict[str, Any]]  # violations of refused requests: no step to sit at
    duration: str
    seqs: dict[str, int] = field(default_factory=dict)  # step id → its number in the trace


def step_anchor(step_id: str) -> str:
    return f"step-{step_id}"


def budget_bar(used: int, limit: int | None) -> Bar:
    if not limit:
        return Bar(used, None, 0.0, False)
    return Bar(used, limit, min(used / limit, 1.0), used > limit)


def pretty_arguments(text: str | None) -> tuple[str | None, bool]:
    """Indented JSON when the arguments parse; otherwise the text as sent, flagged invalid."""
    if text is None or text == "":
        return text, True
    try:
        value = json.loads(text)
    except ValueError:
        return text, False
    return json.dumps(value, indent=2, ensure_ascii=False), True


def preview(text: str | None) -> str | None:
    """The head of a long text, or None when the whole text is short enough to show."""
    if text is None:
        return None
    lines = text.split("\n")
    if len(text) <= PREVIEW_CHARS and len(lines) <= PREVIEW_LINES:
        return None
    head = "\n".join(lines[:PREVIEW_LINES])[:PREVIEW_CHARS]
    return head.rstrip() + " …"


def _item_view(item: dict[str, Any], anchor: str, step: dict[str, Any]) -> ItemView:
    kind = item.get("kind") or "other"
    attrs = item.get("attrs") or {}
    view = ItemView(anchor=anchor, kind=kind, label=KIND_LABELS.get(kind, kind))
    view.role = item.get("role")
    view.call_id = item.get("call_id")
    view.tool_name = item.get("tool_name")
    view.is_error = bool(item.get("is_error"))
    view.incomplete = bool(attrs.get("incomplete"))
    length = attrs.get("text_length")
    text = item.get("text")
    if isinstance(length, int) and text is not None and length > len(text):
        view.truncated_from = length
    if kind == "reasoning":
        tokens = attrs.get("tokens")
        if not isinstance(tokens, int):
            tokens = (step.get("usage") or {}).get("reasoning_tokens")
        view.tokens = tokens if isinstance(tokens, int) else None
    view.text = text
    view.preview = preview(text)
    if kind == "tool_call":
        view.arguments, view.arguments_valid = pretty_arguments(item.get("arguments"))
    return view


def _link_calls(steps: list[StepView]) -> None:
    """Point each tool call at the first result that answers it, and each result back."""
    calls: dict[str, ItemView] = {}
    results: dict[str, ItemView] = {}
    for step in steps:
        for view in step.inputs + step.outputs:
            if view.call_id is None:
                continue
            if view.kind == "tool_call":
                calls.setdefault(view.call_id, view)
            elif view.kind == "tool_result":
                results.setdefault(view.call_id, view)
    for step in steps:
        for view in step.inputs + step.outputs:
            if view.call_id is None:
                continue
            partner = (results if view.kind == "tool_call" else calls).get(view.call_id)
            if view.kind in ("tool_call", "tool_result") and partner is not None:
                view.link = f"#{partner.anchor}"


def _timing(offset: float, step: dict[str, Any], span: float) -> list[Segment]:
    """Waiting for the first chunk, then receiving; one segment when TTFT is unknown."""
    x = offset / span * SCALE
    width = max((step.get("latency_ms") or 0.0) / span * SCALE, 2.0)
    ttft = step.get("ttft_ms")
    if ttft is None:
        return [Segment("stream", x, width)]
    wait = min(ttft / span * SCALE, width)
    return [Segment("wait", x, wait), Segment("stream", x + wait, width - wait)]


def _token_segments(usage: dict[str, Any], widest: int) -> list[Segment]:
    prompt = usage.get("prompt_tokens") or 0
    cached = min(usage.get("cached_tokens") or 0, prompt)
    completion = usage.get("completion_tokens") or 0
    reasoning = min(usage.get("reasoning_tokens") or 0, completion)
    parts = [
        ("prompt", prompt - cached),
        ("cached", cached),
        ("completion", completion - reasoning),
        ("reasoning", reasoning),
    ]
    segments, x = [], 0.0
    for kind, tokens in parts:
        width = tokens / widest * SCALE if widest else 0.0
        if tokens:
            segments.append(Segment(kind, x, width, tokens))
        x += width
    return segments


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    return error if isinstance(error, str) else json.dumps(error, indent=2, ensure_ascii=False)


def _step_tokens(step: dict[str, Any]) -> int:
    usage = step.get("usage") or {}
    return int((usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0))


def _offsets(steps: list[dict[str, Any]]) -> tuple[list[float], float]:
    starts = [parse_time(step["started_at"]) for step in steps]
    known = [s for s in starts if s is not None]
    origin: datetime | None = min(known) if known else None
    offsets = [
        (start - origin).total_seconds() * 1000 if start and origin else 0.0 for start in starts
    ]
    ends = [off + (step.get("latency_ms") or 0.0) for off, step in zip(offsets, steps, strict=True)]
    return offsets, max([*ends, 1.0])


def _step_views(trace: dict[str, Any]) -> tuple[list[StepView], float]:
    steps = trace.get("steps") or []
    offsets, span = _offsets(steps)
    widest = max([_step_tokens(step) for step in steps] + [1])
    views = []
    for offset, step in zip(offsets, steps, strict=True):
        view = StepView(
            id=step["id"],
            seq=step["seq"],
            anchor=step_anchor(step["id"]),
            step=step,
            offset_ms=offset,
            timing=_timing(offset, step, span),
            tokens=_token_segments(step.get("usage") or {}, widest),
            token_total=_step_tokens(step),
            error_text=_error_text(step.get("error")),
        )
        for direction, target in (("input", view.inputs), ("output", view.outputs)):
            for position, item in enumerate(step.get(f"{direction}_items") or []):
                anchor = f"s{step['seq']}-{direction[:3]}-{position}"
                target.append(_item_view(item, anchor, step))
        views.append(view)
    return views, span


def trace_view(trace: dict[str, Any]) -> TraceView:
    steps, span = _step_views(trace)
    _link_calls(steps)
    by_id = {step.id: step for step in steps}
    unplaced = []
    for violation in trace.get("violations") or []:
        owner = by_id.get(violation.get("step_id") or "")
        if owner is None:
            unplaced.append(violation)
        else:
            owner.violations.append(violation)
    budget = trace.get("budget") or {}
    usage = trace.get("usage") or {}
    started, updated = parse_time(trace.get("started_at")), parse_time(trace.get("updated_at"))
    elapsed = (updated - started).total_seconds() * 1000 if started and updated else None
    return TraceView(
        trace=trace,
        steps=steps,
        span_ms=span,
        step_budget=budget_bar(trace.get("step_count") or 0, budget.get("max_steps")),
        token_budget=budget_bar(usage.get("total_tokens") or 0, budget.get("max_tokens")),
        unplaced=unplaced,
        duration=duration(elapsed),
        seqs={step.id: step.seq for step in steps},
    )
