"""Recorded shapes filled back with their items: the history elements as the client sent
them, up to redaction (texts as stored, the placeholder for readable reasoning, opaque
payloads only where kept). Items without a shape (older records) are spelled by the
protocol's canonical encoder."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from gateway.items import Item
from gateway.protocols.wire_shapes.keys import (
    ECHO,
    EXTRA,
    OPAQUE,
    REASONING_PLACEHOLDER,
    REF,
    RESPELT,
    WIRE,
    kinds_of,
)

Canonical = Callable[[list[Item]], list[Any]]  # a run of items without shapes → elements
_TOOLS_REF = {REF: ["T"]}  # the step's declared tools
_DROP = object()  # an opaque payload that was not kept: its field is left out


def history(
    items: Sequence[Item], canonical: Canonical, tools: Sequence[Any] | None = None
) -> list[Any]:
    """The history elements `items` were stored from, in order; `tools`: the step's
    declared tools, which a shape may refer to."""
    out: list[Any] = []
    run: list[Item] = []
    at = 0
    while at < len(items):
        cover = covered(items[at])
        extra = _extra_cover(items[at])
        if extra is not None and at + extra[0] <= len(items):
            out += canonical(run) if run else []
            run = []
            count, fields = extra
            made = canonical(list(items[at : at + count]))
            out += [{**made[0], **fields}] if len(made) == 1 and isinstance(made[0], dict) else made
            at += count
        elif cover is not None and at + cover[0] <= len(items):
            out += canonical(run) if run else []
            run = []
            count, elements = cover
            out += [fill(e, items[at : at + count], tools) for e in elements]
            at += count
        else:
            run.append(items[at])
            at += 1
    return out + (canonical(run) if run else [])


def _extra_cover(item: Item) -> tuple[int, dict[str, Any]] | None:
    """How many items a cover of the usual spelling plus fields covers, and the fields."""
    wire = item.attrs.get(WIRE)
    if not isinstance(wire, dict) or not isinstance(wire.get(EXTRA), dict):
        return None
    count = wire.get("n")
    return (count, wire[EXTRA]) if isinstance(count, int) and count >= 1 else None


def covered(item: Item) -> tuple[int, list[Any]] | None:
    """How many items the shape `item` carries covers, and the elements; None: no shape."""
    wire = item.attrs.get(WIRE)
    if not isinstance(wire, dict):
        return None
    count, elements = wire.get("n"), wire.get("els")
    if not isinstance(count, int) or count < 1 or not isinstance(elements, list):
        return None
    return count, elements


def respelt(history_items: list[Item], new: Sequence[Item], answered: int) -> None:
    """`history_items` as the request bringing `new` spelled them: the previous answer (its
    last `answered` items) as echoed, and the few elements before it as re-spelt."""
    first = new[0].attrs if new else {}
    _cover_at(history_items, len(history_items) - answered, first.get(ECHO), answered)
    before = first.get(RESPELT)
    count = _count(before)
    _cover_at(history_items, len(history_items) - answered - count, before, count)


def _count(covers: Any) -> int:
    if not isinstance(covers, list):
        return 0
    return sum(c["n"] for c in covers if isinstance(c, dict) and isinstance(c.get("n"), int))


def _cover_at(history_items: list[Item], start: int, covers: Any, count: int) -> None:
    if start < 0 or count == 0 or _count(covers) != count:
        return
    noted = "".join(str(c.get("k")) for c in covers)
    if noted != kinds_of(history_items[start : start + count]):
        return  # not the items it was recorded over (an answer typed otherwise)
    for at in range(start, start + count):  # shapes there before are replaced
        if WIRE in history_items[at].attrs:
            attrs = {k: v for k, v in history_items[at].attrs.items() if k != WIRE}
            history_items[at] = history_items[at].with_changes(attrs=attrs)
    for cover in covers:
        first = history_items[start]
        history_items[start] = first.with_changes(attrs={**first.attrs, WIRE: cover})
        start += cover["n"]


def fill(shape: Any, items: Sequence[Item], tools: Sequence[Any] | None = None) -> Any:
    if isinstance(shape, dict):
        ref = shape.get(REF) if len(shape) == 1 else None
        if isinstance(ref, list) and ref:
            return _resolve(ref, items, tools)
        out = {}
        for key, value in shape.items():
            filled = fill(value, items, tools)
            if filled is not _DROP:
                out[key] = filled
        return out
    if isinstance(shape, list):
        return [fill(value, items, tools) for value in shape]
    return shape


def refers_to_tools(items: Sequence[Item]) -> bool:
    """True when a shape among `items` holds the step's declared tools: the request sent
    them there, not in a field of their own."""
    return any(_refers(cover[1]) for item in items if (cover := covered(item)) is not None)


def _refers(shape: Any) -> bool:
    if isinstance(shape, dict):
        return shape == _TOOLS_REF or any(_refers(value) for value in shape.values())
    if isinstance(shape, list):
        return any(_refers(value) for value in shape)
    return False


def _resolve(ref: list[Any], items: Sequence[Item], tools: Sequence[Any] | None) -> Any:
    what = ref[0]
    if what == "T":
        return list(tools or ())
    if what == "r":
        return REASONING_PLACEHOLDER
    if what == "m":  # inline media: only its type is recorded
        return _DROP
    item = _at(items, ref[1] if len(ref) > 1 else None)
    if what == "o":
        kept = item.attrs.get(OPAQUE) if item is not None else None
        return kept[ref[2]] if isinstance(kept, dict) and ref[2] in kept else _DROP
    if item is None:
        return ""
    text = item.text or ""
    if what == "t":
        return text
    if what == "a":
        return item.arguments or ""
    if what == "j":
        try:
            return json.loads(item.arguments or "{}")
        except ValueError:
            return {}
    if what == "p":
        return "\n".join(text.split("\n")[ref[2] : ref[2] + ref[3]])
    if what == "s":
        return text[ref[2] : ref[3]]
    return None


def _at(items: Sequence[Item], index: Any) -> Item | None:
    return items[index] if isinstance(index, int) and 0 <= index < len(items) else None
