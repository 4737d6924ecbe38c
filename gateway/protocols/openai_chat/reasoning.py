"""What a Chat Completions message says of its reasoning: its size, a provider's summary, and
what the provider wants back in a tool loop (only that it does, and keyed digests of the
payloads); never the reasoning text. Shared by the response decoder and the request parser.
"""

from __future__ import annotations

from typing import Any

from gateway.items import DIGESTS, RETURNS
from gateway.opaque import Digests
from gateway.stream.deltas import Delta, ReasoningDelta, ReasoningSummaryDelta

# What a provider refuses a tool loop without, as `attrs["returns"]` names it: DeepSeek's (and
# Kimi's) reasoning text on an assistant message with tool calls, present; OpenRouter's signed
# or encrypted `reasoning_details` and Gemini's thought signature on a tool call, unchanged.
REASONING_CONTENT = "reasoning_content"
REASONING_DETAILS = "reasoning_details"
THOUGHT_SIGNATURE = "thought_signature"


def reasoning(message: dict[str, Any], choice: int, out: list[Delta], digests: Digests) -> None:
    """Count reasoning text, never keep it: DeepSeek `reasoning_content`, `reasoning`, details;
    of what must come back in a tool loop, only that it must, and the payloads' digests."""
    chars = 0
    attrs: dict[str, Any] = {}
    for key in (REASONING_CONTENT, "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            chars = len(value)
            if key == REASONING_CONTENT:
                attrs[RETURNS] = REASONING_CONTENT
            break
    signed: tuple[str, ...] = ()
    details = message.get(REASONING_DETAILS)
    if isinstance(details, list):
        detail_chars = 0
        for detail in details:
            if not isinstance(detail, dict):
                continue
            kind = detail.get("type")
            if kind == "reasoning.encrypted":
                attrs["encrypted"] = True
            elif kind == "reasoning.summary" and isinstance(detail.get("summary"), str):
                out.append(ReasoningSummaryDelta(detail["summary"], choice))
            elif isinstance(detail.get("text"), str):
                detail_chars += len(detail["text"])
        # OpenRouter repeats `reasoning` inside the details: count the text once.
        chars = chars or detail_chars
        signed = returned_details(details, digests)
        if signed:
            attrs[RETURNS] = REASONING_DETAILS
    if chars or attrs:
        out.append(ReasoningDelta(chars=chars, choice=choice, attrs=attrs, digests=signed))


def returned_details(details: list[Any], digests: Digests) -> tuple[str, ...]:
    """Digests of the opaque payloads among OpenRouter `reasoning_details`: a text entry's
    `signature`, an encrypted entry's `data` (each whole in one entry, streamed or not)."""
    found: list[str] = []
    for detail in details:
        if not isinstance(detail, dict):
            continue
        payload = detail.get("data" if detail.get("type") == "reasoning.encrypted" else "signature")
        if isinstance(payload, str) and payload:
            found.append(digests.of(payload))
    return tuple(found)


def thought_signature(entry: dict[str, Any], digests: Digests) -> dict[str, Any]:
    """Gemini's `extra_content.google.thought_signature` on a tool call (its OpenAI
    compatibility; the first call of a turn carries it): the digest of the signature."""
    extra = entry.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    if not isinstance(signature, str) or not signature:
        return {}
    return {RETURNS: THOUGHT_SIGNATURE, DIGESTS: [digests.of(signature)]}
