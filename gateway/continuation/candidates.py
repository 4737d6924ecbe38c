"""Which of several recorded steps a request continues, when its history fits them all.

Identical runs sent in parallel record steps with the same input (and, from a provider
that repeats itself, the same output). A request never joins a trace by a guess: it is
told apart by the call ids (and texts) the provider emitted, else by which step no other
request continues yet. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.continuation.keys import StepRef, real_call_id
from gateway.items import ASSISTANT_KINDS, Item, ItemKind


def choose(
    refs: Sequence[StepRef],
    attempt: str,
    claimed_by: Callable[[str], str | None],
    echo: Echo | None = None,
) -> StepRef | None:
    """The step to continue among `refs` (one per trace, oldest first), or None.

    One candidate is continued (a branch of its run, as before). Of several, those whose
    every emitted call id and text the echoed turn holds; then the oldest that no request
    continues yet; then one this same request already continued (its earlier attempt).
    Else none.
    """
    if len(refs) == 1:
        return refs[0]
    if echo is not None:
        named = [ref for ref in refs if _echoes(echo.text, ref)]
        if len(named) == 1:
            return named[0]
        refs = named or refs
    free = [ref for ref in refs if claimed_by(ref.step_id) is None]
    if free:
        return free[0]
    again = [ref for ref in refs if claimed_by(ref.step_id) == attempt]
    return again[0] if len(again) == 1 else None


def _echoes(echo: str, ref: StepRef) -> bool:
    """The echoed turn names every call id the step emitted and holds each of its texts."""
    pieces: list[str] = []
    for item in ref.output_items:
        if item.kind is ItemKind.TOOL_CALL and (call_id := real_call_id(item)) is not None:
            pieces.append(call_id)
        elif item.kind is ItemKind.ASSISTANT_TEXT and item.text and item.text.strip():
            pieces.append(item.text.strip())
    return bool(pieces) and all(piece in echo for piece in pieces)


@dataclass(frozen=True, slots=True)
class Echo:
    """The assistant turn after a recorded input: its text (where a re-rendered echo names
    its calls) and whether it still holds typed tool calls (a rewritten, not re-rendered,
    echo: pairing compares them with what the step emitted)."""

    text: str
    typed_calls: bool


def echo_text(items: list[Item], start: int) -> Echo:
    parts: list[str] = []
    typed = False
    for item in items[start:]:
        if item.kind not in ASSISTANT_KINDS and item.kind is not ItemKind.REASONING:
            break
        typed = typed or item.kind is ItemKind.TOOL_CALL
        parts.extend(part for part in (item.text, item.call_id, item.arguments) if part)
    return Echo("\n".join(parts), typed)
