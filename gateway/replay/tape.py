"""A cassette file read back: its header checked, its steps with a recorded body in order."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import ConfigError

FORMAT = "loopwatch-cassette/1"


@dataclass(frozen=True, slots=True)
class Step:
    seq: int
    protocol: str
    path: str
    request: dict[str, Any]  # {"headers", "body"}
    response: dict[str, Any]  # {"status", "headers", "body" | "events"}


def read(path: str) -> tuple[str, list[Step]]:
    """The recorded trace's id and its replayable steps; ConfigError names what is wrong."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        header, *rows = (json.loads(line) for line in lines if line.strip())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the cassette {path}: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a cassette: its first line names no {FORMAT}")
    steps = [
        Step(row["seq"], row["protocol"], row["path"], row["request"], row["response"])
        for row in rows
        if row.get("request") is not None  # a passthrough call: nothing to answer with
    ]
    return str(header.get("trace_id")), steps
