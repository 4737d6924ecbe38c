"""Shapes of the history elements a step brings: each element's JSON with the texts its
items store replaced by references, readable reasoning by a marker and opaque payloads by
where they go. Built once a step, from its new elements only (and the echo of the previous
answer), so the work is proportional to what the step stores."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from gateway.errors import BadRequest
from gateway.items import ASSISTANT_KINDS, Item, ItemKind
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.wire_shapes import usual as spelling
from gateway.protocols.wire_shapes.keys import ECHO, EXTRA, REF, RESPELT, WIRE, kinds_of
from gateway.protocols.wire_shapes.usual import MAX_ECHO, Canonical, Pairs

# The body field holding each protocol's history, and the one holding its separate
# instruction (kept outside the history), by protocol name.
HISTORY_FIELDS = {"chat": "messages", "messages": "messages", "responses": "input"}
INSTRUCTION_FIELDS = {"messages": "system", "responses": "instructions"}

# Readable reasoning: never stored, a marker stands for it.
_REASONING_KEYS = frozenset({"thinking", "reasoning_content", "reasoning"})
# Parts of reasoning by type, and the key holding their readable text.
_REASONING_PARTS = {
    "reasoning_text": "text",
    "summary_text": "text",
    "reasoning.text": "text",
    "reasoning.summary": "summary",
}
# Opaque payloads a provider wants back: stored only when kept (keys.OPAQUE).
_OPAQUE_KEYS = frozenset({"signature", "encrypted_content", "thought_signature"})
_OPAQUE_BLOCKS = {"redacted_thinking": "data", "reasoning.encrypted": "data"}
_INDEX = "message_index"  # the history element an item came from, where adapters say
_CACHE_MARK = "cache_control"
_ARGUMENT_KEYS = frozenset({"input", "arguments"})
_TEXT_SEPARATORS = ("\n", "")
# How many elements before the echo are shaped again (`keys.RESPELT`).
_RESPELT = 2

Parse = Callable[[Any], Sequence[Item]]  # one history element → its items


def shaped(
    adapter: ProtocolAdapter,
    body: Any,
    new_items: Sequence[Item],
    canonical: Canonical | None = None,
    history: Sequence[Item] | None = None,
) -> tuple[Item, ...]:
    """`new_items` with the shapes of the elements they came from in their attrs; as they
    are when the elements cannot be told apart (then a cassette spells them canonically).
    `canonical`: the protocol's usual spelling; elements spelled so need no shape, so an
    SDK's requests (spelled the usual way) store none. `history`: all the request's items,
    whose tail `new_items` is, for the common case's quick look."""
    try:
        return _shaped(adapter, body, new_items, canonical, history)
    except (BadRequest, ValueError, TypeError, KeyError, RecursionError):
        # A body the gateway forwards as sent is never refused for its shape: the step is
        # recorded without one.
        return tuple(new_items)


def _shaped(
    adapter: ProtocolAdapter,
    body: Any,
    new_items: Sequence[Item],
    canonical: Canonical | None,
    history: Sequence[Item] | None,
) -> tuple[Item, ...]:
    protocol = adapter.name

    def separate(item: Item) -> bool:  # from the instruction field, not the history
        return adapter.is_separate_instruction(item) and _INDEX not in item.attrs

    field = HISTORY_FIELDS.get(protocol)
    if not new_items or field is None or not isinstance(body, dict):
        return tuple(new_items)

    def parse(element: Any) -> list[Item]:
        return adapter.parse_request({field: [element]}).items

    items = list(new_items)
    tools = adapter.contained_tools(body)  # stored as the step's tool set: referred to
    apart = [n for n, item in enumerate(items) if separate(item)]
    if len(apart) == 1 and isinstance(body.get(INSTRUCTION_FIELDS.get(protocol, "")), str | list):
        at = apart[0]
        value = body[INSTRUCTION_FIELDS[protocol]]
        items[at] = spelling.carrying(items[at], {WIRE: _cover([value], [items[at]])})
    elements = body.get(field)
    rest = [n for n, item in enumerate(items) if not separate(item)]
    if not rest or not isinstance(elements, list):
        return tuple(items)
    quick = spelling.quick(elements, items, history, canonical) if len(rest) == len(items) else None
    return quick or _looked(elements, items, rest, parse, (tools, canonical))


def _looked(
    elements: list[Any],
    items: list[Item],
    rest: list[int],
    parse: Parse,
    how: tuple[list[Any] | None, Canonical | None],
) -> tuple[Item, ...]:
    """`items` shaped from a look at each element the new items (`rest` of them) came from,
    the answer echoed before them and, for a client marking cache points, the turns before."""
    tools, canonical = how
    found = _tail(elements, len(rest), parse)
    if found is None:
        return tuple(items)
    new, echo, before = found
    at = 0
    marks: list[bool] = []
    covers: list[dict[str, Any]] = []
    if not spelling.usual_pairs(new, canonical):
        covers = _covers(new, marks=marks, tools=tools, usual=canonical)
    for cover in covers:
        items[rest[at]] = spelling.carrying(items[rest[at]], {WIRE: cover})
        at += cover["n"]
    echoed: list[dict[str, Any]] = []
    if not spelling.usual_pairs(echo, canonical):
        echoed = _covers(echo, noted=True, tools=tools, usual=canonical)
    respelt = {ECHO: echoed}
    if any(marks):  # a client that marks cache points moves them: its latest turns change
        respelt[RESPELT] = _covers(before(), noted=True, tools=tools)
    items[rest[0]] = spelling.carrying(items[rest[0]], {k: v for k, v in respelt.items() if v})
    return tuple(items)


def _tail(
    elements: list[Any], count: int, parse: Parse
) -> tuple[Pairs, Pairs, Callable[[], Pairs]] | None:
    """The last elements holding `count` items, the answer echoed just before them, and a
    few elements before that (clients re-spell their latest turns: cache marks move)."""
    at = len(elements)
    new: Pairs = []
    held = 0
    while held < count and at > 0:
        at -= 1
        typed = list(parse(elements[at]))
        new.insert(0, (elements[at], typed))
        held += len(typed)
    if held != count:
        return None
    echo: Pairs = []
    while at > 0 and len(echo) < MAX_ECHO:
        typed = list(parse(elements[at - 1]))
        if not typed or any(i.kind not in ASSISTANT_KINDS for i in typed):
            break
        at -= 1
        echo.insert(0, (elements[at], typed))

    def before() -> Pairs:  # read only for a client that marks cache points
        found = [(elements[n], list(parse(elements[n]))) for n in range(max(0, at - _RESPELT), at)]
        # Not from an earlier answer's turn: its items as stored may be typed otherwise.
        while found and all(i.kind in ASSISTANT_KINDS for i in found[0][1]):
            found.pop(0)
        return found

    return new, echo, before


def _covers(
    pairs: Pairs,
    *,
    noted: bool = False,
    marks: list[bool] | None = None,
    tools: list[Any] | None = None,
    usual: Canonical | None = None,
) -> list[dict[str, Any]]:
    """A shape for each element with items; one without is shaped with the next. `noted`:
    each notes the kinds it covers (it will be laid over items stored before); `marks`
    gets whether each element marks a cache point."""
    out: list[dict[str, Any]] = []
    pending: list[Any] = []
    for element, typed in pairs:
        if not typed:
            pending.append(element)
            continue
        extra = None if pending or usual is None else spelling.extra(element, typed, usual)
        if extra is not None:  # the usual spelling and a few fields more: those alone
            out.append({"n": len(typed), EXTRA: extra})
            if marks is not None:
                marks.append(False)
        else:
            out.append(_cover([*pending, element], typed, marks, tools))
        if noted:
            out[-1]["k"] = kinds_of(typed)
        pending = []
    if pending and out:
        out[-1]["els"] += _Shaper([], tools).shapes(pending)
    return out


def _cover(
    elements: list[Any],
    items: list[Item],
    marks: list[bool] | None = None,
    tools: list[Any] | None = None,
) -> dict[str, Any]:
    shaper = _Shaper(items, tools)
    cover = {"n": len(items), "els": shaper.shapes(elements)}
    if marks is not None:
        marks.append(shaper.marked)
    return cover


class _Shaper:
    """Walks elements once, replacing what the items hold by references to them."""

    def __init__(self, items: list[Item], tools: list[Any] | None = None) -> None:
        self.items = items
        self.tools = tools  # the very list stored as the step's tool set, if one is
        self.used: set[int] = set()
        self.loose: list[tuple[Any, Any, str]] = []  # (container, key, text) not matched
        self.reasoning = [n for n, i in enumerate(items) if i.kind is ItemKind.REASONING]
        self.marked = False  # a cache point was marked (`cache_control`)

    def shapes(self, elements: list[Any]) -> list[Any]:
        out = [self._walk(spelling.decoded(e), None) for e in elements]
        self._join_pieces()
        return out

    def _walk(self, value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            return self._object(value)
        if isinstance(value, list):
            shaped_list: list[Any] = []
            for n, element in enumerate(value):
                shaped_list.append(self._walk(element, None))
                self._note(shaped_list, n, element)
            return shaped_list
        return value

    def _object(self, value: dict[str, Any]) -> dict[str, Any]:
        kind = value.get("type")
        opaque = {*(k for k in _OPAQUE_KEYS if k in value)}
        if isinstance(kind, str) and _OPAQUE_BLOCKS.get(kind) in value:
            opaque.add(_OPAQUE_BLOCKS[kind])
        owner = self._next_reasoning() if opaque or kind == "thinking" else None
        out: dict[str, Any] = {}
        self.marked = self.marked or _CACHE_MARK in value
        for key, field in value.items():
            if field is self.tools and field is not None:
                out[key] = {REF: ["T"]}
            elif key in opaque:
                if field is not None:
                    out[key] = {REF: ["o", owner, key]}
                else:
                    out[key] = None
            elif isinstance(field, str) and is_media(key, field, kind):
                out[key] = {REF: ["m"]}  # images, audio and files: never stored
            elif isinstance(field, str) and field and _readable_reasoning(key, kind):
                out[key] = {REF: ["r"]}
            elif key in _ARGUMENT_KEYS and isinstance(field, dict | list):
                out[key] = self._arguments(field)
            else:
                out[key] = self._walk(field, key)
                self._note(out, key, field)
        return out

    def _next_reasoning(self) -> int | None:
        for n in self.reasoning:
            if n not in self.used:
                self.used.add(n)
                return n
        return None

    def _arguments(self, value: Any) -> Any:
        for n, item in enumerate(self.items):
            if n in self.used or item.kind is not ItemKind.TOOL_CALL or item.arguments is None:
                continue
            try:
                if json.loads(item.arguments) == value:
                    self.used.add(n)
                    return {REF: ["j", n]}
            except ValueError:
                continue
        return self._walk(value, None)

    def _note(self, container: Any, key: Any, value: Any) -> None:
        """A text: a reference to the item holding it, or kept aside as a piece of one."""
        if not isinstance(value, str) or not value:
            return
        for n, item in enumerate(self.items):
            if n in self.used:
                continue
            if item.text == value and item.kind is not ItemKind.REASONING:
                self.used.add(n)
                container[key] = {REF: ["t", n]}
                return
            if item.arguments == value:
                self.used.add(n)
                container[key] = {REF: ["a", n]}
                return
        self.loose.append((container, key, value))

    def _join_pieces(self) -> None:
        """Texts the protocol joined into one item (text parts, blocks): pieces of it."""
        for n, item in enumerate(self.items):
            text = item.text
            if n in self.used or not text or item.kind is ItemKind.REASONING:
                continue
            pieces = [p for p in self.loose if p[2] in text]
            for sep in _TEXT_SEPARATORS:
                if pieces and sep.join(p[2] for p in pieces) == text:
                    self._cut(n, pieces, sep)
                    break

    def _cut(self, n: int, pieces: list[tuple[Any, Any, str]], sep: str) -> None:
        self.used.add(n)
        at = 0
        for container, key, value in pieces:
            if sep:
                lines = value.count(sep) + 1
                container[key] = {REF: ["p", n, at, lines]}
                at += lines
            else:
                container[key] = {REF: ["s", n, at, at + len(value)]}
                at += len(value)
            self.loose.remove((container, key, value))


def _readable_reasoning(key: str, kind: Any) -> bool:
    if kind in _REASONING_PARTS:
        return key == _REASONING_PARTS[kind]
    return key in _REASONING_KEYS and kind != "redacted_thinking"


def is_media(key: str, value: str, kind: Any) -> bool:
    """The content of an image, a sound or a file, inline (base64, a `data:` URL)."""
    return (
        value.startswith("data:")
        or key == "file_data"
        or (key == "data" and kind in ("base64", "input_audio"))
    )
