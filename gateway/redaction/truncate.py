"""Truncation of long stored texts: keep the head and the tail at line breaks, mark the cut."""

from __future__ import annotations


def cut_marker(count: int) -> str:
    return f"\n[… {count:,} characters cut …]\n"


def precut(text: str, keep: int) -> tuple[int, int] | None:
    """Where to cut a huge text before redacting it: after `keep` characters and `keep` before
    its end, at line breaks (no built-in rule spans lines); None when that saves nothing."""
    if len(text) <= 2 * keep:
        return None
    head_end = text.find("\n", keep)
    tail_start = text.rfind("\n", 0, len(text) - keep)
    if head_end < 0 or tail_start < 0 or tail_start <= head_end:
        return None
    return head_end, tail_start


def cut_middle(head: str, tail: str, limit: int, original: int) -> tuple[str, list[int] | None]:
    """`head`'s start and `tail`'s end within `limit` characters, a marker between them.

    Returns the text and the marker's [start, end]; a limit too small for a marker keeps the
    head only, as earlier versions did.
    """
    marker = cut_marker(original)
    room = limit - len(marker)
    if room < 2 * len(marker):
        return (head + tail)[:limit], None
    head_keep = _at_line_end(head, room // 2)
    tail_keep = _at_line_start(tail, room - len(head_keep))
    marker = cut_marker(max(original - len(head_keep) - len(tail_keep), 0))
    text = head_keep + marker + tail_keep
    return text[:limit], [len(head_keep), len(head_keep) + len(marker)]


def _at_line_end(text: str, size: int) -> str:
    """The first `size` characters, ending at a line break when one is near the end."""
    piece = text[:size]
    newline = piece.rfind("\n", max(0, size - 200))
    return piece[: newline + 1] if newline > 0 else piece


def _at_line_start(text: str, size: int) -> str:
    """The last `size` characters, starting after a line break when one is near the start."""
    piece = text[-size:] if size > 0 else ""
    newline = piece.find("\n", 0, 200)
    return piece[newline + 1 :] if 0 <= newline < len(piece) - 1 else piece
