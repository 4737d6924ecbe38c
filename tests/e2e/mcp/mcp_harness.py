"""Real MCP servers for the tests (subprocesses of tests/e2e/mcp/mcp_server.py on free ports) and
a gateway that proxies them next to the fake model provider."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Gateway, GatewayFactory

ROOT = Path(__file__).resolve().parents[3]
START_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def mcp_server_process(module: str = "tests.e2e.mcp.mcp_server") -> Iterator[str]:
    """A test MCP server (`module`) over Streamable HTTP; yields its endpoint URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", module, "http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                assert process.stderr is not None
                raise RuntimeError(f"MCP test server did not start: {process.stderr.read()!r}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


@pytest.fixture(scope="session")
def mcp_url() -> Iterator[str]:
    """One server for the session: its tool list never changes (tests that change one
    start their own)."""
    with mcp_server_process() as url:
        yield url


async def mcp_gateway(make_gateway: GatewayFactory, url: str, **overrides: Any) -> Gateway:
    return await make_gateway(mcp_servers=({"name": "tools", "url": url},), **overrides)


async def flush(gateway: Gateway) -> None:
    """Everything recorded so far is stored: model steps and MCP records."""
    await gateway.flush()
    from gateway.app import MCP

    assert await gateway.app[MCP].flush()
