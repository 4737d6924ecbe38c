"""Recorded provider transcripts under tests/fixtures/<protocol>/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent.parent / "fixtures"


def fixture_path(protocol: str, name: str) -> Path:
    return FIXTURES / protocol / name


def load_fixture(protocol: str, name: str) -> Any:
    """tests/fixtures/<protocol>/<name>: `.sse` files as bytes, `.json` files parsed.

    `name` may omit the extension when only one file has that stem.
    """
    path = fixture_path(protocol, name)
    if not path.suffix:
        matches = sorted(path.parent.glob(f"{path.name}.*"))
        if len(matches) != 1:
            raise FileNotFoundError(f"{protocol}/{name}: {len(matches)} matching fixtures")
        path = matches[0]
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    return path.read_bytes()


def fixture_names(protocol: str, pattern: str = "*") -> list[str]:
    return sorted(p.name for p in (FIXTURES / protocol).glob(pattern))
