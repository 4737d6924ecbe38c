"""Identifiers: time-ordered trace and step ids, and the rule for client-chosen trace ids."""

from __future__ import annotations

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
