"""A request's new items against the recorded step's: what the request adds beyond the
history (tool results, user turns), ids, times and reasoning ignored; the first difference
as a one-line summary and a detail."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.items import ASSISTANT_KINDS, Item, ItemKind


@dataclass(frozen=True, slots=True)
class Divergence:
    seq: int  # the step that differs
    index: int  # the new item that differs, from 0
    recorded: dict[str, Any] | None  # None: the request adds an item the recording lacks
    received: dict[str, Any] | None  # None: the request lacks a recorded item

    def summary(self) -> str:
        old, new = _short(self.recorded), _short(self.received)
        return f"replay diverged at step {self.seq}, new item {self.index}: {old} → {new}"

    def detail(self) -> dict[str, Any]:
        return {
            "step": self.seq,
            "item": self.index,
            "recorded": self.recorded,
            "received": self.received,
        }


def new_items(items: list[Item]) -> list[Item]:
    """The items after the last answer of the model: the turn this request adds."""
    last = max((n for n, item in enumerate(items) if item.kind in ASSISTANT_KINDS), default=-1)
    return [item for item in items[last + 1 :] if item.kind is not ItemKind.REASONING]


def first_difference(seq: int, recorded: list[Item], received: list[Item]) -> Divergence | None:
    old = [_comparable(i) for i in new_items(recorded)]
    new = [_comparable(i) for i in new_items(received)]
    for index in range(max(len(old), len(new))):
        a = old[index] if index < len(old) else None
        b = new[index] if index < len(new) else None
        if a != b:
            return Divergence(seq, index, a, b)
    return None


def _comparable(item: Item) -> dict[str, Any]:
    shown: dict[str, Any] = {"kind": item.kind.value}
    for name in ("role", "text", "tool_name", "is_error"):
        value = getattr(item, name)
        if value is not None:
            shown[name] = value
    if item.arguments is not None:  # redaction rewrites JSON arguments compactly
        shown["arguments"] = _json_value(item.arguments)
    return shown


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _short(item: dict[str, Any] | None) -> str:
    if item is None:
        return "(none)"
    said = item.get("text", item.get("arguments"))
    shown = json.dumps(said, ensure_ascii=False) if said is not None else ""
    if len(shown) > 80:
        shown = shown[:77] + '..."'
    return f"{item['kind']} {shown}".strip()
