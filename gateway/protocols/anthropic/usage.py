"""Anthropic usage reports → token counts and what else was billed.

When the server ran several sampling iterations in one request (compaction, a fallback to
another model, an advisor) `usage.iterations` lists each; a compaction's tokens are not in
the top-level counts (anthropic.types.beta.BetaUsage), so the step's usage is the sum over
the iterations: what is billed. Shapes: anthropic 2.17 `types/usage.py`,
`types/beta/beta_usage.py`, `beta_iterations_usage.py`, `server_tool_usage.py`,
`cache_creation.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.items import Billing, Share, Usage
from gateway.protocols.json_values import as_dict, as_int, as_str
from gateway.stream.deltas import BillingDelta, Delta, MetaDelta, UsageDelta

INPUT_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_COUNTED = (*INPUT_FIELDS, "output_tokens")
# The iteration of the fallback model that served the answer: its model answered the step
# (anthropic.types.beta.BetaFallbackMessageIterationUsage).
_SERVED_BY_FALLBACK = "fallback_message"
# `server_tool_use` counts each tool's requests as `<tool>_requests` (web_search_requests,
# web_fetch_requests): kept by the tool's name, new tools included.
_REQUESTS = "_requests"


def usage_of(counts: Mapping[str, int], thinking: int | None = None) -> Usage:
    inputs = [counts[name] for name in INPUT_FIELDS if name in counts]
    prompt = sum(inputs) if inputs else None
    completion = counts.get("output_tokens")
    both = prompt is not None and completion is not None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=(prompt or 0) + (completion or 0) if both else None,
        cached_tokens=counts.get("cache_read_input_tokens"),
        reasoning_tokens=thinking,
        cache_creation_tokens=counts.get("cache_creation_input_tokens"),
    )


@dataclass(slots=True)
class UsageState:
    """Running token counts: message_start reports input, message_delta cumulative output
    (and, at the end, the iterations and server tool counts).

    Every report yields a whole Usage computed from this state, so a merge of the deltas in
    any order of arrival ends with prompt, completion and total that agree with each other.
    """

    counts: dict[str, int] = field(default_factory=dict)
    thinking: int | None = None
    iterated: bool = False  # the counts are the iterations' sums, which win

    def update(self, raw: Any) -> list[Delta]:
        if not isinstance(raw, dict):
            return []
        listed = raw.get("iterations")
        iterations = [i for i in listed if isinstance(i, dict)] if isinstance(listed, list) else []
        if iterations:
            self.iterated = True
            self.counts.update(_summed(iterations, raw))
        elif not self.iterated:
            self.counts.update(_counts(raw))
        thinking = as_int(as_dict(raw.get("output_tokens_details")).get("thinking_tokens"))
        self.thinking = self.thinking if thinking is None else thinking
        out: list[Delta] = [UsageDelta(usage_of(self.counts, self.thinking))]
        billing = _billing(raw, iterations)
        if billing is not None:
            out.append(BillingDelta(billing))
        served = _fallback_model(iterations)
        if served is not None:
            out.append(MetaDelta(model=served))
        return out


def _counts(raw: Mapping[str, Any]) -> dict[str, int]:
    return {name: v for name in _COUNTED if (v := as_int(raw.get(name))) is not None}


def _summed(iterations: list[dict[str, Any]], raw: Mapping[str, Any]) -> dict[str, int]:
    """Each count summed over the iterations; one no iteration reports, as the top level
    has it."""
    totals = _counts(raw)
    for name in _COUNTED:
        values = [v for i in iterations if (v := as_int(i.get(name))) is not None]
        if values:
            totals[name] = sum(values)
    return totals


def _hour_writes(usage: Mapping[str, Any]) -> int | None:
    return as_int(as_dict(usage.get("cache_creation")).get("ephemeral_1h_input_tokens"))


def _billing(raw: Mapping[str, Any], iterations: list[dict[str, Any]]) -> Billing | None:
    tools = {
        name.removesuffix(_REQUESTS): count
        for name, value in as_dict(raw.get("server_tool_use")).items()
        if name.endswith(_REQUESTS) and (count := as_int(value))
    }
    shares: tuple[Share, ...] = ()
    if any(as_str(i.get("model")) for i in iterations):
        shares = tuple(
            Share(as_str(i.get("model")), usage_of(_counts(i)), _hour_writes(i) or 0)
            for i in iterations
        )
    hours = [h for i in iterations if (h := _hour_writes(i)) is not None]
    hour = sum(hours) if hours else _hour_writes(raw)
    many = len(iterations) if len(iterations) > 1 else None
    billing = Billing(tools, many, shares, hour or None)
    return billing if (tools or many or shares or billing.cache_write_1h_tokens) else None


def _fallback_model(iterations: list[dict[str, Any]]) -> str | None:
    for iteration in reversed(iterations):
        if iteration.get("type") == _SERVED_BY_FALLBACK:
            return as_str(iteration.get("model"))
    return None
