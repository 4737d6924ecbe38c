"""A request body read once, by a compiled decoder: every top-level field becomes its value,
except the history, whose elements stay the client's own JSON text (`msgspec.Raw`). An
adapter types each element from that text and remembers the result by it, so the turns an
agent echoes in every request are not decoded and walked again; and what the gateway
rewrites in a body (a clamp, usage asked for) is spliced around that text, never a
re-serialisation of it (`jsoncodec.dumps` writes a Raw as it came).

Anything the decoder refuses (not an object, NaN, a number out of range) is read by
`jsoncodec.loads_unicode`, with the standard library's rules. What neither reads (bytes that
are not UTF-8, a lone surrogate, text that is not JSON, nesting past the parser) is the
gateway's `BadRequest`, for the whole body or for a history element when it is typed: the
client gets a 400 in its protocol, never a 500.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from gateway import jsoncodec
from gateway.errors import BadRequest
from gateway.memory import REMEMBERED_ELEMENTS_BYTES, TUPLE, ByteLru, text_bytes

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ANY = msgspec.json.Decoder()
T = TypeVar("T")


def decode(raw: bytes, history: str | None) -> Any:
    """The body's JSON, with the field `history` (when it is an array) as its elements' text.
    Raises BadRequest for a body that is not JSON in UTF-8."""
    try:
        return _decode(raw, history)
    except (ValueError, RecursionError) as exc:
        raise _unreadable(exc) from exc


def _unreadable(exc: ValueError | RecursionError) -> BadRequest:
    """The error of a body, or a part of it, that no JSON reader here reads."""
    if isinstance(exc, RecursionError):
        return BadRequest("Request body is JSON nested too deeply.")
    return BadRequest(f"Request body is not valid JSON: {exc}")


def _decode(raw: bytes, history: str | None) -> Any:
    if history is None:
        return jsoncodec.loads_unicode(raw)
    try:
        top = _TOP.decode(raw)
        body: dict[str, Any] = {}
        for name, value in top.items():
            body[name] = _elements(value) if name == history else _ANY.decode(value)
        return body
    except (msgspec.DecodeError, msgspec.ValidationError):
        return jsoncodec.loads_unicode(raw)


def _elements(value: msgspec.Raw) -> Any:
    try:
        return _LIST.decode(value)
    except msgspec.ValidationError:  # not an array: the adapter records its shape
        return _ANY.decode(value)


def _value(text: bytes) -> Any:
    try:
        try:
            return _ANY.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return jsoncodec.loads_unicode(text)  # NaN, numbers out of range: as a body's
    except (ValueError, RecursionError) as exc:
        raise _unreadable(exc) from exc


def _entry_bytes(key: tuple[int, bytes], made: Any) -> int:
    """The key and its text, and about as much again for the items made of it."""
    return TUPLE + 2 * text_bytes(key[1]) + 200


class Remembered:
    """What an adapter made of a history element, by (position, the element's text): an
    agent's next request repeats every earlier element at the same position. Bounded in
    bytes (the text and the items made of it, oldest first); 4 MB hold 64 agents' last
    32 messages of 1 KB each."""

    def __init__(self, budget: int = REMEMBERED_ELEMENTS_BYTES, max_chars: int = 8192) -> None:
        self._entries = ByteLru[tuple[int, bytes], Any](budget, _entry_bytes)
        self._max_chars = max_chars
        self._lock = threading.Lock()  # large bodies are parsed in a thread

    def get(self, position: int, value: msgspec.Raw, make: Callable[[Any], T]) -> T:
        """`make(decoded element)`, or what it made for the same text at this position."""
        text = bytes(value)
        if len(text) > self._max_chars:
            return make(_value(text))
        key = (position, text)
        found = self._entries.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        made = make(_value(text))
        with self._lock:
            self._entries.put(key, made)
        return made
