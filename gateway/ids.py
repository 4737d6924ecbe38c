"""Identifiers: time-ordered trace and step ids, the rule for client-chosen trace ids, and the
span id of a tool call's `execute_tool` span."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time

TRACE_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _time_ordered(prefix: str) -> str:
    # 48 bits of milliseconds then 64 random bits: sorts by creation time, never collides.
    return f"{prefix}-{int(time.time() * 1000):012x}{os.urandom(8).hex()}"


def new_trace_id() -> str:
    return _time_ordered("tr")


def new_step_id() -> str:
    return _time_ordered("st")


def tool_span_id(trace_id: str, call_id: str) -> int:
    """The OpenTelemetry span id of a tool call's `execute_tool` span, derived (64 bits of
    SHA-256, never 0): every replica exports it under the same id, and a sub-agent started
    by the call may name it in its `traceparent`."""
    material = b"loopwatch.tool\x00" + trace_id.encode() + b"\x00" + call_id.encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big") or 1


def traceparent_span_id(traceparent: str | None) -> int | None:
    """The parent span id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), or None."""
    parts = (traceparent or "").strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        return int(parts[2], 16) or None
    except ValueError:
        return None


# The header the fork API sends its request through the proxy with: the trace and step it
# forks, signed with the install secret so that no client can name itself another's fork.
FORK_HEADER = "X-Loopwatch-Fork"


def _fork_mac(secret: bytes, fork_of: str, fork_at: int, trace_id: str) -> str:
    material = f"loopwatch.fork\x00{fork_of}\x00{fork_at}\x00{trace_id}".encode()
    return hmac.new(secret, material, hashlib.sha256).hexdigest()[:32]


def fork_mark(secret: bytes, fork_of: str, fork_at: int, trace_id: str) -> str:
    """The fork header's value for a fork of `fork_of` at step `fork_at` into `trace_id`."""
    return f"{fork_of} {fork_at} {_fork_mac(secret, fork_of, fork_at, trace_id)}"


def read_fork_mark(secret: bytes, value: str | None, trace_id: str) -> tuple[str, int] | None:
    """The (trace, step) a fork header names, if it is the gateway's own for `trace_id`."""
    parts = (value or "").split(" ")
    if len(parts) != 3 or not parts[1].isdigit() or not TRACE_ID_RE.match(parts[0]):
        return None
    expected = _fork_mac(secret, parts[0], int(parts[1]), trace_id)
    if not hmac.compare_digest(expected.encode(), parts[2].encode()):
        return None
    return parts[0], int(parts[1])
