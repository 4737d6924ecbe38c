"""Fixtures for the agent CLI runs: the gateway in front of the scripted coding model, a sealed
home for each run, and the proxy that catches calls home. Every request that reached the
provider is kept in the test's temporary directory (requests.json) to read after a run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import harness
from tests.agent_clis.runner import CallHome, Sandbox
from tests.fakes.scripted_agent import AgentModel
from tests.harness import Gateway, GatewayFactory

# The gateway fixtures, by assignment.
provider, make_gateway = harness.provider, harness.make_gateway


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """SQLite only: the clients are what varies here."""
    metafunc.definition.add_marker(pytest.mark.sqlite)


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, tmp_path: Path) -> AsyncIterator[Gateway]:
    gw = await make_gateway()
    gw.provider.responder = AgentModel()
    yield gw
    seen = [
        {"method": r.method, "path": r.path, "headers": r.headers, "body": r.body.decode()}
        for r in gw.provider.received
    ]
    (tmp_path / "requests.json").write_text(json.dumps(seen, indent=1))


@pytest.fixture
async def call_home() -> AsyncIterator[CallHome]:
    proxy = CallHome()
    await proxy.start()
    yield proxy
    await proxy.close()


@pytest.fixture
def sandbox(tmp_path: Path, call_home: CallHome) -> Sandbox:
    return Sandbox(tmp_path / "run", call_home.url)
