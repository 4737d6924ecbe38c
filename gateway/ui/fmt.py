"""Formatting for pages: times, durations and token counts as people read them."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def short_time(value: str | None) -> str:
    """'2025-01-01 12:00:03' in UTC; the full ISO time goes in the <time> element."""
    when = parse_time(value)
    if when is None:
        return "—"
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def duration(ms: float | None) -> str:
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} m {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} m"


def tokens(value: int | None) -> str:
    if value is None:
        return "—"
    if value < 10_000:
        return f"{value:,}"
    if value < 1_000_000:
        return f"{value / 1000:.1f}k"
    return f"{value / 1_000_000:.2f}M"
