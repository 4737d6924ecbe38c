"""A store seeded with the demo's sample runs, shared by the read API's schema tests."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.processes import environment


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of a SQLite store holding the demo's runs (`loopwatch demo --once`): every
    kind of trace the gateway records, sub-agents, violations, MCP executions."""
    url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'demo.db'}"
    command = [sys.executable, "-m", "gateway", "demo", "--once", "--port", "0"]
    subprocess.run(
        [*command, "--database-url", url],
        env=environment(),
        capture_output=True,
        check=True,
        timeout=180,
    )
    return url
