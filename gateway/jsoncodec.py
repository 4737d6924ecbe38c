"""JSON in and out on the hot path and in the writer: orjson, with the standard library's
rules kept for what orjson refuses (NaN, integers past 64 bits, lone surrogates). Records'
read-only mappings (`types.MappingProxyType`) are written as the objects they show; a value
held as JSON text (`msgspec.Raw`, see `protocols.request_body`) is written as it is.
"""

from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import Any

import msgspec
import orjson


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse like `json.loads`: raises ValueError (or RecursionError) for what it refuses."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # Rare: orjson is stricter than the standard library, which then decides.
        return json.loads(bytes(data) if isinstance(data, memoryview | bytearray) else data)


def loads_unicode(data: bytes) -> Any:
    """Parse a client's body like `loads`, but refuse (ValueError) what no Unicode text
    holds: bytes that are not UTF-8 and lone surrogates, escaped or encoded. Providers
    answer both as invalid JSON, and no record could be stored with them."""
    try:
        return orjson.loads(data)  # strict already: UTF-8 only, surrogates in pairs
    except orjson.JSONDecodeError:
        pass
    # `json.loads` reads bytes with "surrogatepass": decoded strictly here instead.
    value = json.loads(data.decode("utf-8"))
    if _holds_lone_surrogate(value):
        raise ValueError("a string holds a lone surrogate (\\ud800-\\udfff): not Unicode text")
    return value


# After decoding, an escaped pair is one character: any surrogate left stands alone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _holds_lone_surrogate(value: Any) -> bool:
    pending = [value]  # a loop, not recursion: the value may be nested as deep as json reads
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def plain(value: Any) -> Any:
    """The `default` hook of both encoders: a read-only mapping as its dict (called only for
    a value the encoder does not know, so plain values cost nothing)."""
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`."""
    try:
        return orjson.dumps(value, default=_as_fragment)
    except TypeError:  # an integer past 64 bits, a non-string key, a lone surrogate
        # ASCII escapes: a lone surrogate has no UTF-8 form but is valid escaped JSON.
        return json.dumps(value, separators=(",", ":"), default=_as_value).encode()


def _as_fragment(value: Any) -> Any:
    if isinstance(value, msgspec.Raw):
        return orjson.Fragment(bytes(value))
    return plain(value)


def _as_value(value: Any) -> Any:
    if isinstance(value, msgspec.Raw):
        return json.loads(bytes(value))
    return plain(value)


def dumps_text(value: Any) -> str:
    return dumps(value).decode()


# orjson writes every float with a digit then "." or "e"; the standard library may write the
# same float otherwise (1e+16 where orjson writes 1e16), so text with such a pair is left to it.
_FLOAT_LIKE = re.compile(rb"\d[.eE]")


def canonical(text: str | bytes, *, ensure_ascii: bool) -> str:
    """`json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=...)`
    exactly (hashes and stored keys are made of it), by orjson where its text is the same.
    Raises what `json.loads` raises."""
    try:
        out = orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)
    except (ValueError, TypeError):  # NaN, integers past 64 bits, lone surrogates, depth
        out = None
    # For ASCII output the standard library escapes what is not printable ASCII (DEL too).
    same = out is not None and (not ensure_ascii or (out.isascii() and b"\x7f" not in out))
    if same and out is not None and _FLOAT_LIKE.search(out) is None:
        return out.decode()
    value = json.loads(text)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)
