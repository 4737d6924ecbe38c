"""What a step's provider said beyond its tokens, as the step shows it: the model that
answered when another was asked for, the tools the provider ran and how often, a refusal's
category, the sampling iterations and each model's tokens when several ran."""

from __future__ import annotations

from typing import Any


def provider_facts(step: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs of the step's attrs (the read API's `attrs`), in reading order."""
    attrs = step.get("attrs") or {}
    facts: list[tuple[str, str]] = []
    requested = attrs.get("requested_model")
    if requested:
        facts.append(("Model", f"{step.get('model') or '—'} answered; {requested} asked for"))
    tools = attrs.get("server_tool_requests") or {}
    if tools:
        runs = ", ".join(f"{name.replace('_', ' ')}: {count}" for name, count in tools.items())
        facts.append(("Provider tools", runs))
    if attrs.get("refusal_category"):
        facts.append(("Refusal category", str(attrs["refusal_category"])))
    if attrs.get("iterations"):
        facts.append(("Iterations", f"{attrs['iterations']} sampling iterations, tokens summed"))
    for model, usage in (attrs.get("usage_by_model") or {}).items():
        tokens = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
        facts.append((f"Tokens of {model}", f"{tokens:,}"))
    if attrs.get("cache_write_1h_tokens"):
        facts.append(("Cache writes for 1 h", f"{attrs['cache_write_1h_tokens']:,} tokens"))
    return facts
