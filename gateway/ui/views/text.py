"""Texts as the page shows them: JSON pretty-printed, the store's cut marked, long ones
previewed by their head and tail (errors sit at the end of a tool's output)."""

from __future__ import annotations

import json
from dataclasses import dataclass

PREVIEW_CHARS = 700
PREVIEW_LINES = 14
HEAD_LINES, TAIL_LINES = 8, 4
HEAD_CHARS, TAIL_CHARS = 420, 260
PRETTY_MAX = 200_000  # larger JSON is shown as stored: indenting it would only add bytes


@dataclass(frozen=True, slots=True)
class Piece:
    text: str
    cut: bool = False  # the store's marker where the middle of a long text was left out


@dataclass(slots=True)
class TextView:
    pieces: list[Piece]
    length: int
    pretty: bool = False  # JSON that parsed, shown indented
    head: str | None = None  # set when the text is long: the collapsed preview
    tail: str | None = None
    hidden_lines: int = 0


def pretty_json(text: str) -> str | None:
    """The text indented when it is a JSON object or array; None otherwise."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")) or len(text) > PRETTY_MAX:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return json.dumps(value, indent=2, ensure_ascii=False)


def _pieces(text: str, cut: object) -> list[Piece]:
    if (
        isinstance(cut, list)
        and len(cut) == 2
        and all(isinstance(n, int) for n in cut)
        and 0 <= cut[0] < cut[1] <= len(text)
    ):
        start, end = cut
        marker = text[start:end].strip()
        return [Piece(text[:start]), Piece(marker, cut=True), Piece(text[end:])]
    return [Piece(text)]


def text_view(text: str, *, cut: object = None, as_json: bool = False) -> TextView:
    """`cut` is the [start, end] of the store's marker (attrs text_cut / arguments_cut)."""
    shown = text
    pretty = None
    if as_json and cut is None:
        pretty = pretty_json(text)
        shown = pretty or text
    view = TextView(_pieces(shown, cut), len(text), pretty=pretty is not None)
    _preview(view, shown)
    return view


def _preview(view: TextView, text: str) -> None:
    lines = text.split("\n")
    if len(text) <= PREVIEW_CHARS and len(lines) <= PREVIEW_LINES:
        return
    if len(lines) > HEAD_LINES + TAIL_LINES + 2:
        head = "\n".join(lines[:HEAD_LINES])
        tail = "\n".join(lines[-TAIL_LINES:])
        view.hidden_lines = len(lines) - HEAD_LINES - TAIL_LINES
    else:
        head, tail = text, ""
    if len(head) > HEAD_CHARS:
        head = head[:HEAD_CHARS]
    if len(tail) > TAIL_CHARS:
        tail = tail[-TAIL_CHARS:]
    if not tail and len(text) > len(head):
        tail = text[-TAIL_CHARS:] if len(text) > HEAD_CHARS + TAIL_CHARS else ""
    view.head, view.tail = head, tail or None
