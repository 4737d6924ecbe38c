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


def money(usd: float | None) -> str:
    """'$0.0042', '$1.23'; a dash when nothing is known. A cost too small for four
    decimals reads '<$0.0001', never '$0.0000', which would read as free."""
    if usd is None:
        return "—"
    if usd == 0:
        return "$0"
    if usd < 0.00005:
        return "<$0.0001"
    if usd < 0.01:
        return f"${usd:.4f}"
    if usd < 100:
        return f"${usd:.2f}"
    return f"${usd:,.0f}"


def percent(part: float, whole: float) -> str:
    if whole <= 0:
        return "—"
    return f"{round(100 * part / whole)}%"


def one_line(text: str | None, limit: int = 120) -> str | None:
    """Whitespace folded to single spaces, cut at a word near `limit` with an ellipsis."""
    if not text:
        return None
    folded = " ".join(text.split())
    if len(folded) <= limit:
        return folded or None
    cut = folded[:limit]
    space = cut.rfind(" ", limit - 20)
    return (cut[:space] if space > 0 else cut).rstrip(" ,.;:") + "…"


def id_parts(value: str) -> tuple[str, str]:
    """(head, tail) of an id: the tail is what tells ids apart, since generated ids share
    their time-ordered start; short ids are all tail."""
    if len(value) <= 14:
        return "", value
    return value[:-8], value[-8:]


def as_time(value: object) -> str | None:
    """An ISO text from a datetime or a string, for values read straight off the store."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return value if isinstance(value, str) else None
