"""A request body read once, by a compiled decoder: every top-level field becomes its value,
except the history, whose elements stay the client's own JSON text (`msgspec.Raw`). An
adapter types each element from that text and remembers the result by it, so the turns an
agent echoes in every request are not decoded and walked again; and what the gateway
rewrites in a body (a clamp, usage asked for) is spliced around that text, never a
re-serialisation of it (`jsoncodec.dumps` writes a Raw as it came).

Anything the decoder refuses (not an object, NaN, a number out of range, a lone surrogate)
is read by `jsoncodec.loads` as before, with its rules and errors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from gateway import jsoncodec

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ANY = msgspec.json.Decoder()
T = TypeVar("T")


def decode(raw: bytes, history: str | None) -> Any:
    """The body's JSON, with the field `history` (when it is an array) as its elements' text."""
    if history is None:
        return jsoncodec.loads(raw)
    try:
        top = _TOP.decode(raw)
        body: dict[str, Any] = {}
        for name, value in top.items():
            body[name] = _elements(value) if name == history else _ANY.decode(value)
        return body
    except (msgspec.DecodeError, msgspec.ValidationError):
        return jsoncodec.loads(raw)


def _elements(value: msgspec.Raw) -> Any:
    try:
        return _LIST.decode(value)
    except msgspec.ValidationError:  # not an array: the adapter records its shape
        return _ANY.decode(value)


def element(value: Any) -> Any:
    """An element of the history as a value (decoded when it is kept as text)."""
    return _ANY.decode(value) if isinstance(value, msgspec.Raw) else value


class Remembered:
    """What an adapter made of a history element, by (position, the element's text): an
    agent's next request repeats every earlier element at the same position. Bounded in
    entries and in the size of the text kept: at most ~2 x capacity x max_chars bytes (the
    text and the items made of it), 32 MB by default; 2,048 entries hold 64 agents' last
    32 messages each."""

    def __init__(self, capacity: int = 2048, max_chars: int = 8192) -> None:
        self._entries: dict[tuple[int, bytes], Any] = {}
        self._capacity = capacity
        self._max_chars = max_chars
        self._lock = threading.Lock()  # large bodies are parsed in a thread

    def get(self, position: int, value: msgspec.Raw, make: Callable[[Any], T]) -> T:
        """`make(decoded element)`, or what it made for the same text at this position."""
        text = bytes(value)
        if len(text) > self._max_chars:
            return make(_ANY.decode(text))
        key = (position, text)
        found = self._entries.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        made = make(_ANY.decode(text))
        with self._lock:
            self._entries[key] = made
            if len(self._entries) > self._capacity:
                # Oldest first: dicts keep insertion order.
                del self._entries[next(iter(self._entries))]
        return made
