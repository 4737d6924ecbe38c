"""A gateway killed right after answering MCP tool calls loses none of their records.

A real `loopwatch serve` proxies a real MCP server; 10 clients call tools; once enough calls
are answered the gateway's process group and its recorder get SIGKILL; a gateway started
later on another port stores every answered call from the spool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.mcp.mcp_harness import mcp_url  # noqa: F401
from tests.e2e.test_crash_recovery import _free_port, _recorder_of, _serve
from tests.fakes.provider import FakeProvider
from tests.harness import provider  # noqa: F401

pytestmark = pytest.mark.sqlite

CLIENTS, CALLS = 10, 10
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "read_text_file",
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "crash", "version": "1"},
}


async def _client(
    http: aiohttp.ClientSession, url: str, client: int, answered: list[str], killed: asyncio.Event
) -> None:
    for call in range(CALLS):
        path = f"/crash/{client}/{call}"
        body = {
            "jsonrpc": "2.0",
            "id": call,
            "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": path}, "_meta": META},
        }
        try:
            async with http.post(url, json=body, headers=HEADERS) as r:
                text = await r.text()
                if r.status == 200 and f"contents of {path}" in text:
                    answered.append(path)
        except (TimeoutError, aiohttp.ClientError):
            return  # the gateway died under this call: it was never answered
        if killed.is_set():
            return


def _stored_paths(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        try:
            rows = conn.execute("SELECT arguments FROM mcp_executions WHERE outcome = 'ok'")
            return {json.loads(row[0])["path"] for row in rows}
        except sqlite3.OperationalError:
            return set()


async def _kill_when_answered(gateway: subprocess.Popen[bytes], url: str, enough: int) -> list[str]:
    answered: list[str] = []
    killed = asyncio.Event()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        clients = [
            asyncio.ensure_future(_client(http, url, i, answered, killed)) for i in range(CLIENTS)
        ]
        while len(answered) < enough:
            await asyncio.sleep(0.002)
        recorder = _recorder_of(gateway)
        os.killpg(gateway.pid, signal.SIGKILL)  # calls in flight right now
        if recorder is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(recorder, signal.SIGKILL)
        killed.set()
        await asyncio.wait_for(asyncio.gather(*clients), 30)
    return answered


async def test_a_killed_gateway_loses_no_answered_mcp_call(
    provider: FakeProvider, mcp_url: str, tmp_path: Path
) -> None:
    db, spool, port = tmp_path / "lw.db", tmp_path / "spool", _free_port()
    upstream = provider.url  # type: ignore[attr-defined]
    gateway = await _serve(db, spool, upstream, port, mcp_servers=f"tools={mcp_url}")
    try:
        url = f"http://127.0.0.1:{port}/mcp/tools"
        answered = await _kill_when_answered(gateway, url, CLIENTS * CALLS // 2)
        gateway.wait(30)
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
            gateway.wait(10)
    assert len(answered) >= CLIENTS * CALLS // 2
    restarted = await _serve(
        db, spool, upstream, _free_port(), mcp_servers=f"tools={mcp_url}"
    )  # another port
    try:
        lost = set(answered)
        for _ in range(600):
            lost = set(answered) - _stored_paths(db)
            if not lost:
                break
            await asyncio.sleep(0.05)
        assert lost == set(), f"{len(lost)} of {len(answered)} answered MCP calls lost"
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(30)
