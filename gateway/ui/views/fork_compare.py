"""A fork beside what it forked: the original step and the fork's first step side by side
(text, tool calls and their arguments, stop reason, tokens, cost, latency)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.items import ItemKind


@dataclass(frozen=True, slots=True)
class Side:
    label: str  # "Original" or "Fork"
    href: str  # the step's page
    model: str | None
    texts: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]  # (tool name, arguments)
    stop_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class ForkCompare:
    fork_of: str
    fork_at: int
    original: Side | None  # None: the original step is gone (retention)
    fork: Side | None  # None: the fork's step is not stored (refused before the provider)


def fork_compare(
    trace: Mapping[str, Any], original: Mapping[str, Any] | None
) -> ForkCompare | None:
    """The comparison for a fork's trace (`original`: the forked step as the store gives
    it); None for a trace that is no fork."""
    fork_of, fork_at = trace.get("fork_of"), trace.get("fork_at")
    if fork_of is None or fork_at is None:
        return None
    steps = trace.get("steps") or []
    mine = _side("Fork", str(trace["id"]), steps[0]) if steps else None
    theirs = None if original is None else _side("Original", str(fork_of), original)
    return ForkCompare(str(fork_of), int(fork_at), theirs, mine)


def _side(label: str, trace_id: str, step: Mapping[str, Any]) -> Side:
    outputs = step.get("output_items") or []
    texts = tuple(
        i["text"] for i in outputs if i["kind"] == ItemKind.ASSISTANT_TEXT.value and i.get("text")
    )
    calls = tuple(
        (str(i.get("tool_name") or ""), str(i.get("arguments") or ""))
        for i in outputs
        if i["kind"] == ItemKind.TOOL_CALL.value
    )
    usage = step.get("usage") or {}
    return Side(
        label,
        f"/traces/{trace_id}/steps/{step['id']}",
        step.get("model"),
        texts,
        calls,
        step.get("stop_reason"),
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        step.get("cost_usd"),
        step.get("latency_ms"),
    )
