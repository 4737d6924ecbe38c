"""Whole-gateway runs: every test here carries the `e2e` marker. The folders mirror the package
a run is about (proxy/, mcp/, ui/ …). tests/agent_clis/ and tests/frameworks/ run whole
gateways too and stay apart, named for the real clients they drive; no other test starts one
(tests/test_layout.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
