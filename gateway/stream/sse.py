"""Incremental Server-Sent Events decoder: bytes in any split → complete events.

Placeholder interface; the implementation follows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. `raw` is the exact bytes it came from (comments included)."""

    event: str | None
    data: str
    id: str | None = None
    raw: bytes = b""
