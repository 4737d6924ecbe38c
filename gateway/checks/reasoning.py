"""Reasoning a provider requires back (`reasoning_not_returned`), sans-IO.

A request that answers tool calls of the step it continues must carry, in the assistant turn
it echoes, what that step's answer marked as wanted back (`attrs["returns"]`, set by the
adapters): each opaque payload, known by its keyed digest, or the reasoning's presence where
no digest is kept. Most answers mark nothing, and the check then ends at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from gateway.errors import ReasoningNotReturned
from gateway.items import (
    ASSISTANT_KINDS,
    DIGESTS,
    RETURNS,
    Item,
    ItemKind,
    Violation,
    ViolationKind,
    provider_run,
)

ReasoningMode = Literal["observe", "enforce"]

_KIND = ViolationKind.REASONING_NOT_RETURNED


def check_returned(
    previous_output: Sequence[Item], items: Sequence[Item], new_items: Sequence[Item]
) -> list[Violation]:
    """`reasoning_not_returned` for each payload of the previous step's answer that this
    request, answering that step's tool calls, does not send back as it was given.

    `items` is the request's whole history, `new_items` what is new since that step. A
    request that answers none of the step's calls is no tool loop: the reasoning of a turn
    that ended may be dropped. Calls the request answers without echoing them are pairing's
    to judge (`orphan_tool_result`): no turn, nothing judged here.
    """
    owed = [item for item in previous_output if RETURNS in item.attrs]
    if not owed:
        return []
    answered = _answered(previous_output, new_items)
    if not answered:
        return []
    turn = _echoed_turns(items, set(answered))
    if not turn:
        return []
    returned = {digest for item in turn for digest in _digests(item)}
    present = {item.attrs.get(RETURNS) for item in turn}
    choices = set(answered.values())
    found: list[Violation] = []
    for item in owed:
        if (item.attrs.get("choice") or 0) not in choices:
            continue  # a choice of an `n > 1` answer the client did not go on from
        digests = _digests(item)
        missing = [d for d in digests if d not in returned]
        if missing or (not digests and item.attrs.get(RETURNS) not in present):
            found.append(_violation(item, len(missing), len(digests)))
    return found


def _answered(previous_output: Sequence[Item], new_items: Sequence[Item]) -> dict[str, int]:
    """The previous step's client tool calls this request answers, by id → their choice."""
    results = {
        item.call_id
        for item in new_items
        if item.kind is ItemKind.TOOL_RESULT and item.call_id and not provider_run(item)
    }
    if not results:
        return {}
    return {
        item.call_id: item.attrs.get("choice") or 0
        for item in previous_output
        if item.kind is ItemKind.TOOL_CALL and item.call_id in results and not provider_run(item)
    }


def _echoed_turns(items: Sequence[Item], calls: set[str]) -> list[Item]:
    """The assistant turns of the history that echo `calls`, searched from the end (where
    the echo of the step just before stands)."""
    turn: list[Item] = []
    calls = set(calls)
    position = len(items) - 1
    while position >= 0 and calls:
        item = items[position]
        if item.kind is ItemKind.TOOL_CALL and item.call_id in calls:
            low, high = position, position
            while low > 0 and _in_turn(items[low - 1]):
                low -= 1
            while high + 1 < len(items) and _in_turn(items[high + 1]):
                high += 1
            turn += items[low : high + 1]
            calls -= {i.call_id for i in items[low : high + 1] if i.call_id}
            position = low
        position -= 1
    return turn


def _in_turn(item: Item) -> bool:
    """Part of an assistant turn: what the model says, what its provider ran in it, and
    blocks of the turn the adapter could not type."""
    return (
        item.kind in ASSISTANT_KINDS
        or provider_run(item)
        or (item.kind is ItemKind.OTHER and item.role == "assistant")
    )


def _digests(item: Item) -> list[str]:
    digests = item.attrs.get(DIGESTS)
    return [d for d in digests if isinstance(d, str)] if isinstance(digests, list) else []


def _violation(item: Item, missing: int, total: int) -> Violation:
    label = item.attrs.get(RETURNS)
    if item.kind is ItemKind.TOOL_CALL:
        name = f" ({item.tool_name})" if item.tool_name else ""
        detail = (
            f"Tool call {item.call_id}{name} carried a {label} that must come back with the "
            "call when its result is sent; this request drops or changes it, so the provider "
            "will refuse it."
        )
        return Violation(_KIND, detail, call_id=item.call_id)
    count = f" ({missing} of {total} payloads)" if total > 1 else ""
    detail = (
        f"The previous step's answer carried {label} that must come back unchanged with the "
        f"tool calls whose results this request sends; its echoed assistant turn drops or "
        f"changes it{count}, so the provider will refuse it."
    )
    return Violation(_KIND, detail)


def refusal(
    violations: list[Violation], mode: ReasoningMode, *, param: str
) -> ReasoningNotReturned | None:
    """Under `enforce`, the 400 refusing a request with a `reasoning_not_returned`, whose
    violation is then marked enforced in `violations`; None under `observe`."""
    if mode != "enforce":
        return None
    first = next((v for v in violations if v.kind is _KIND), None)
    if first is None:
        return None
    violations[violations.index(first)] = Violation(
        first.kind, first.detail, first.call_id, enforced=True
    )
    message = (
        f"Loopwatch reasoning check failed: {_KIND.value}: {first.detail} Send the assistant "
        "turn back as the provider gave it, its reasoning included, or set "
        "LOOPWATCH_REASONING_CHECK=observe to forward such requests."
    )
    return ReasoningNotReturned(message, param=param)
