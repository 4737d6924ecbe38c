"""Fixtures for the framework runs: the gateway in front of the fake provider, whose replies
come from a scripted model (tool calls first, then a final answer from the tool results)."""

from __future__ import annotations

import pytest

from tests import harness
from tests.frameworks.checks import scripted_gateway
from tests.harness import Gateway, GatewayFactory

# The gateway fixtures, by assignment.
provider, make_gateway = harness.provider, harness.make_gateway


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """SQLite only: the frameworks are what varies here."""
    metafunc.definition.add_marker(pytest.mark.sqlite)


# Switches that keep the frameworks from calling home, set for each test only (the rest of the
# suite exports the gateway's own OpenTelemetry data): agno's usage telemetry, and any
# OpenTelemetry SDK a framework sets up (strands traces through OpenTelemetry).
NO_TELEMETRY = {"AGNO_TELEMETRY": "false", "OTEL_SDK_DISABLED": "true"}


@pytest.fixture(autouse=True)
def no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in NO_TELEMETRY.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(params=[True, False], ids=["parallel", "sequential"])
def parallel(request: pytest.FixtureRequest) -> bool:
    """Both tool calls in one model turn, or one call a turn."""
    return bool(request.param)


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, parallel: bool) -> Gateway:
    return await scripted_gateway(make_gateway, parallel=parallel)


@pytest.fixture
def steps(parallel: bool) -> int:
    """Model requests of one run: a turn per round of tool calls, then the answer."""
    return 2 if parallel else 3
