"""The usual spelling of history elements (each protocol's cassette encoder's), against
which a wire shape is recorded: elements spelled so need none, and one spelled so but for a
few fields keeps those alone."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from gateway.items import ASSISTANT_KINDS, Item, ItemKind
from gateway.protocols.wire_shapes.keys import ECHO, EXTRA, kinds_of

Canonical = Callable[[list[Item]], list[Any]]  # items → elements spelled the usual way
Pairs = list[tuple[Any, list[Item]]]  # history elements and the items of each
MAX_ECHO = 64  # an echo longer than this is not an answer's echo


def quick(
    elements: list[Any],
    new: list[Item],
    history: Sequence[Item] | None,
    usual: Canonical | None,
) -> tuple[Item, ...] | None:
    """The common case without parsing elements again: the new elements are the usual
    spelling of the new items, and the answer before them is echoed so, or so but for a few
    fields more. None: the whole look decides."""
    if usual is None or history is None:
        return None
    start = len(history) - len(new)
    if start < 0 or any(a is not b for a, b in zip(history[start:], new, strict=True)):
        return None
    # The usual spelling may leave reasoning out (a Responses reasoning item): a run with
    # reasoning takes the whole look, which finds each element of it.
    if any(item.kind is ItemKind.REASONING for item in history[max(0, start - MAX_ECHO) :]):
        return None
    spelled = usual(new)
    n = len(spelled)
    if not n or n > len(elements) or [decoded(e) for e in elements[-n:]] != spelled:
        return None
    count = 0
    while count < start and history[start - 1 - count].kind in ASSISTANT_KINDS:
        count += 1
    if not count:
        return tuple(new)
    echo = list(history[start - count : start])
    echoed = usual(echo)
    m = len(echoed)
    if m != 1 or n + m > len(elements):
        return None
    fields = extra(elements[len(elements) - n - 1], echo, usual)
    if fields is None:
        return None
    if not fields:
        return tuple(new)
    cover = {"n": count, "k": kinds_of(echo), EXTRA: fields}
    return (carrying(new[0], {ECHO: [cover]}), *new[1:])


def usual_pairs(pairs: Pairs, canonical: Canonical | None) -> bool:
    """The elements are what the usual spelling of their items gives: no shape needed."""
    if canonical is None or not pairs:
        return False
    if any(not typed for _, typed in pairs):
        return False  # an element with no items of its own is only known by its shape
    items = [item for _, typed in pairs for item in typed]
    return canonical(items) == [decoded(element) for element, _ in pairs]


def extra(element: Any, typed: list[Item], usual: Canonical) -> dict[str, Any] | None:
    """The fields `element` has beyond the usual spelling of its items (`{}`: none), when
    it is that spelling otherwise; None when it differs in more (it needs a whole shape)."""
    sent = decoded(element)
    spelled = usual(list(typed))
    if not isinstance(sent, dict) or len(spelled) != 1 or not isinstance(spelled[0], dict):
        return None
    fields = {key: value for key, value in sent.items() if key not in spelled[0]}
    rest = {key: value for key, value in sent.items() if key not in fields}
    return fields if rest == spelled[0] else None


def decoded(element: Any) -> Any:
    return msgspec.json.decode(element) if isinstance(element, msgspec.Raw) else element


def carrying(item: Item, carried: dict[str, Any]) -> Item:
    return item.with_changes(attrs={**item.attrs, **carried})
