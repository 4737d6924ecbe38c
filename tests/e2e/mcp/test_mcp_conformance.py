"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
tests/e2e/mcp/conformance) runs its server scenarios against an SDK server directly and through
`/mcp/NAME`: every scenario passes directly, and the gateway changes no verdict."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.mcp.mcp_harness import mcp_gateway, mcp_server_process
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

NODE_PROJECT = Path(__file__).parent / "conformance"
BIN = NODE_PROJECT / "node_modules" / ".bin"
TIME_LIMIT = 180.0  # seconds one run of the suite may take before it is killed
# The summary line the suite prints for each scenario it ran.
SUMMARY_LINE = re.compile(r"^[✓✗] (?P<scenario>[\w./-]+): \d+ passed, (?P<failed>\d+) failed")
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")

SCENARIOS = 32  # the server scenarios of the pinned version, pending ones included


def install_problem() -> str | None:
    """Why the suite cannot run here, or None."""
    if shutil.which("npm") is None:
        return "npm is not installed"
    if not (BIN / "conformance").exists():
        return "no node_modules: run `npm ci` in tests/e2e/mcp/conformance"
    return None


pytestmark = [
    pytest.mark.conformance,
    pytest.mark.sqlite,  # the MCP side is what varies
    pytest.mark.skipif(install_problem() is not None, reason=str(install_problem())),
]


@dataclass
class Scenario:
    """One scenario's verdict as the suite counts it (passed: no failed check) and its checks
    that are not informational, as `check id: STATUS (message)`."""

    passed: bool
    checks: list[str]


@pytest.fixture(scope="module")
def conformance_url() -> Iterator[str]:
    with mcp_server_process("tests.e2e.mcp.conformance_server") as url:
        yield url


async def run_suite(url: str, out: Path) -> dict[str, Scenario]:
    """Every server scenario of the suite (pending ones included) against `url`."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    argv = [str(BIN / "conformance"), "server", "--url", url, "--suite", "all", "-o", str(out)]
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=NODE_PROJECT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group: killed whole on expiry
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout=TIME_LIMIT)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, _ = await process.communicate()
        raise AssertionError(f"the suite ran past {TIME_LIMIT} s against {url}") from None
    output = stdout.decode(errors="replace")
    verdicts = {
        m["scenario"]: m["failed"] == "0"
        for m in map(SUMMARY_LINE.match, output.splitlines())
        if m is not None
    }
    assert verdicts, f"no scenario summary from the suite against {url}:\n{output[-3000:]}"
    checks = _checks(out)
    missing = ["no checks.json"]  # the scenario threw before writing its checks
    return {name: Scenario(ok, checks.get(name, missing)) for name, ok in verdicts.items()}


def _checks(out: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(out.glob("*/checks.json")):
        match = RESULT_DIR.match(path.parent.name)
        assert match is not None, f"unexpected result directory {path.parent.name}"
        found[match["scenario"]] = [_described(c) for c in json.loads(path.read_text())]
    return {name: [c for c in checks if c] for name, checks in found.items()}


def _described(check: dict[str, Any]) -> str:
    if check["status"] == "INFO":
        return ""
    message = f" ({check['errorMessage']})" if check.get("errorMessage") else ""
    return f"{check['id']}: {check['status']}{message}"


def _failures(results: dict[str, Scenario]) -> str:
    return "\n".join(
        f"{name}: {'; '.join(s.checks)}" for name, s in sorted(results.items()) if not s.passed
    )


async def test_the_gateway_passes_what_the_server_passes(
    make_gateway: GatewayFactory, conformance_url: str, tmp_path: Path
) -> None:
    direct = await run_suite(conformance_url, tmp_path / "direct")
    assert len(direct) == SCENARIOS, sorted(direct)
    assert all(s.passed for s in direct.values()), f"failing directly:\n{_failures(direct)}"

    gateway = await mcp_gateway(make_gateway, conformance_url)
    proxied = await run_suite(f"{gateway.url}/mcp/tools", tmp_path / "gateway")

    assert proxied.keys() == direct.keys()
    passing = {name for name, s in proxied.items() if s.passed}
    lost = sorted(direct.keys() - passing)
    assert not lost, f"pass directly, fail through /mcp/tools: {lost}\n{_failures(proxied)}"
    # Warnings too (a stream not resumed, say): through the gateway each check ends the same.
    differ = {
        name: {"direct": direct[name].checks, "gateway": s.checks}
        for name, s in proxied.items()
        if s.checks != direct[name].checks
    }
    assert not differ, f"checks that end otherwise through /mcp/tools: {differ}"
