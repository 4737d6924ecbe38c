"""Typed items as the protocol adapters build them, one builder per kind a test needs."""

from __future__ import annotations

from typing import Any

from gateway.items import DIGESTS, RETURNS, Item, ItemKind


def user_text(text: str = "hi") -> Item:
    return Item(ItemKind.USER, role="user", text=text)


def instruction(text: str = "be brief") -> Item:
    return Item(ItemKind.INSTRUCTION, role="system", text=text)


def assistant_text(text: str = "ok") -> Item:
    return Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=text)


def reasoning(tokens: int = 12) -> Item:
    """Reasoning that happened: its token count, never its text."""
    return Item(ItemKind.REASONING, role="assistant", attrs={"tokens": tokens})


def returned_reasoning(label: str, *digests: str, **attrs: Any) -> Item:
    """Reasoning its provider wants back in a tool loop, as the adapters record it: what
    (`label`) and the digests of its payloads (none: its presence is what counts)."""
    facts: dict[str, Any] = {RETURNS: label, **attrs}
    if digests:
        facts[DIGESTS] = list(digests)
    return Item(ItemKind.REASONING, role="assistant", attrs=facts)


def tool_call(
    arguments: str | None = "{}",
    *,
    call_id: str | None = "call_1",
    name: str | None = "get_weather",
    **attrs: Any,
) -> Item:
    """A model's tool call; `attrs` as the adapters set them (incomplete=True, choice=1...)."""
    return Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=call_id,
        tool_name=name,
        arguments=arguments,
        attrs=dict(attrs),
    )


def tool_result(
    call_id: str | None = "call_1", *, text: str = "r", name: str | None = None, **attrs: Any
) -> Item:
    """The agent's answer to a tool call, as the next request carries it."""
    return Item(
        ItemKind.TOOL_RESULT,
        role="tool",
        call_id=call_id,
        tool_name=name,
        text=text,
        attrs=dict(attrs),
    )
