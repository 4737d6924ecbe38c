"""OTel trace ids derived from Loopwatch trace ids, so every replica exports a trace's spans
under one trace id without asking the others."""

from __future__ import annotations

import hashlib
import random
import re

from opentelemetry.sdk.trace.id_generator import IdGenerator

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


class StepIds(IdGenerator):
    """Random span ids; the trace id the exporting thread sets just before starting a root
    span, random when it set none (one thread starts spans, so a plain field suffices)."""

    def __init__(self) -> None:
        self.next_trace_id: int | None = None

    def generate_span_id(self) -> int:
        return random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.next_trace_id or random.getrandbits(128) or 1
