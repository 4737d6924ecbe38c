"""OTel trace ids derived from Loopwatch trace ids, so every replica exports a trace's spans
under one trace id without asking the others. Plain hashing: no OpenTelemetry import, as the
MCP side joins by these ids in every gateway, exporting or not."""

from __future__ import annotations

import hashlib
import re

_W3C_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_DOMAIN = b"loopwatch.trace\x00"


def trace_id_of(loopwatch_trace_id: str) -> int:
    """A Loopwatch trace id that already is a W3C trace id (32 lowercase hex digits, not all
    zero) is used as it is, so a client can name its trace by its own OTel trace id; any
    other is hashed (SHA-256, first 128 bits)."""
    if _W3C_TRACE_ID.match(loopwatch_trace_id):
        value = int(loopwatch_trace_id, 16)
        if value:
            return value
    digest = hashlib.sha256(_DOMAIN + loopwatch_trace_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1
