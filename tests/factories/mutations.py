"""Real requests of every wire protocol, from the recorded fixtures, and a hypothesis strategy
that breaks them as a faulty or hostile client would: fields deleted or swapped for another
type, numbers JSON allows but few readers keep, then bytes flipped, cut, and invalid UTF-8 or
a lone surrogate put inside the text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.factories.fixtures import fixture_names, load_fixture

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
_PROTOCOL_OF = {path: protocol for protocol, path in PATHS.items()}

# Numbers written as raw JSON text: a sentinel string stands in for each until serialised.
_RAW_NUMBERS = [b"1e999", b"-1e999", b"NaN", b"Infinity", b"123456789012345678901234567890", b"-0"]
_SENTINEL = "\x00raw-number-{}\x00"
# Values of every JSON type, swapped in for a field: the adapters must type or pass each.
_SWAPS: list[Any] = [
    None,
    True,
    0,
    -1,
    2**70,
    1.5,
    "",
    "x",
    [],
    [1, "a", None],
    {},
    {"type": "unknown_kind"},
    {"role": "user"},
    *(_SENTINEL.format(i) for i in range(len(_RAW_NUMBERS))),
]
# Bytes that are not UTF-8: a lone byte, a cut sequence, an encoded surrogate, past U+10FFFF.
INVALID_UTF8 = [
    b"\xff",
    b"\xfe\xff",
    b"\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
]
# Escapes inside a string: lone surrogates (not Unicode text) and a valid pair.
ESCAPES = [b"\\ud800", b"\\udfff", b"\\ud83d", b"\\ud83d\\ude00", b"\\u0000"]


def seed_requests() -> list[tuple[str, dict[str, Any]]]:
    """(protocol, body) of every recorded request: agents' own and the providers' fixtures."""
    seeds: list[tuple[str, dict[str, Any]]] = []
    for name in fixture_names("agents", "*.json"):
        document = load_fixture("agents", name)
        seeds.append((_PROTOCOL_OF[document["path"].split("?")[0]], document["body"]))
    seeds.append(("chat", load_fixture("chat", "request_roundtrip.json")))
    seeds.append(("messages", load_fixture("messages", "request_thinking_budget.json")))
    for protocol in ("messages", "responses"):
        for name in fixture_names(protocol, "*.json"):
            document = load_fixture(protocol, name)
            request = document.get("request") if isinstance(document, dict) else None
            if isinstance(request, dict):  # messages fixtures keep the whole HTTP request
                seeds.append((protocol, request.get("body", request)))
            if isinstance(document, dict) and isinstance(document.get("followup_request"), dict):
                seeds.append((protocol, document["followup_request"]))
    return seeds


def readable(raw: bytes) -> bool:
    """The reference: strict UTF-8, JSON by the standard library, an object, Unicode text."""
    try:
        value = json.loads(raw.decode("utf-8"))
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate raises
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict)


def _structural(value: Any, draw: Any, top: bool = False) -> Any:
    """One node of the document (chosen by the draw) deleted or swapped for another value;
    the body itself stays an object (one that is not is refused before anything else)."""
    if isinstance(value, dict) and value and (top or draw(st.integers(0, 3))):
        key = draw(st.sampled_from(sorted(value)))
        if draw(st.integers(0, 4)) == 0:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: _structural(value[key], draw)}
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        index = draw(st.integers(0, len(value) - 1))
        if draw(st.integers(0, 4)) == 0:
            return value[:index] + value[index + 1 :]
        return [*value[:index], _structural(value[index], draw), *value[index + 1 :]]
    return draw(st.sampled_from(_SWAPS))


def serialise(document: Any) -> bytes:
    raw = json.dumps(document, ensure_ascii=False).encode()
    for index, number in enumerate(_RAW_NUMBERS):
        raw = raw.replace(json.dumps(_SENTINEL.format(index)).encode(), number)
    return raw


def _inside_text(raw: bytes, draw: Any) -> int:
    """A position just after a letter: nearly always inside a key or a string value."""
    letters = [i + 1 for i, byte in enumerate(raw) if 0x61 <= byte <= 0x7A]
    return draw(st.sampled_from(letters)) if letters else 0


def _bytewise(raw: bytes, draw: Any) -> bytes:
    kind = draw(st.sampled_from(["flip", "cut", "utf8", "escape"]))
    if kind == "flip":
        at = draw(st.integers(0, max(len(raw) - 1, 0)))
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    if kind == "cut":
        return raw[: draw(st.integers(0, len(raw)))]
    at = _inside_text(raw, draw)
    inserted = draw(st.sampled_from(INVALID_UTF8 if kind == "utf8" else ESCAPES))
    return raw[:at] + inserted + raw[at:]


@st.composite
def mutated_requests(draw: Any, seeds: list[tuple[str, dict[str, Any]]]) -> tuple[str, bytes]:
    """(protocol, body bytes): a seed with up to three structural mutations, then one of
    its bytes changed when none was made (or one time in three)."""
    protocol, document = draw(st.sampled_from(seeds))
    structural = draw(st.integers(0, 3))
    for _ in range(structural):
        document = _structural(document, draw, top=True)
    raw = serialise(document)
    if not structural or draw(st.integers(0, 2)) == 0:
        raw = _bytewise(raw, draw)
    return protocol, raw
