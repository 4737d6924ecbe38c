"""A gateway killed with SIGKILL mid-load loses no record of a request it answered.

A real `loopwatch serve` (its recorder process included) is killed, process group and all,
while 20 agents have requests in flight; the next start stores what was spooled.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.chat import completion, streamed
from tests.fakes.provider import FakeProvider, Reply
from tests.harness import make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

API_KEY = "sk-crash-test-0123456789abcdefghijklmnop"
AGENTS, STEPS = 20, 10  # 200 requests


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _serve(db: Path, spool: Path, upstream: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")},
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{db}",
        "LOOPWATCH_SPOOL_DIR": str(spool),
        "LOOPWATCH_UPSTREAM_URL": upstream,
        "LOOPWATCH_PORT": str(port),
        # A long batching delay: at the kill, records wait in the spool, not in the store.
        "LOOPWATCH_RECORDER_FLUSH_SECONDS": "2",
        "LOOPWATCH_RECORDER_BATCH_SIZE": "1000",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the recorder dies with it
    )
    async with aiohttp.ClientSession() as session:
        for _ in range(400):
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return process
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    process.kill()
    raise AssertionError("gateway did not start")


def _reply(number: int) -> Reply:
    delay = 0.005 * (number % 7)
    if number % 2:
        reply = streamed(f"streamed answer {number}")
        reply.delay = delay
        return reply
    return Reply(body=completion(f"answer {number}"), delay=delay)


async def _agent(
    session: aiohttp.ClientSession, url: str, agent: int, answered: list[str], killed: asyncio.Event
) -> None:
    for step in range(STEPS):
        body: dict[str, Any] = {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": f"agent {agent} step {step}"}],
            "stream": step % 2 == 1,
        }
        try:
            async with session.post(
                url, json=body, headers={"Authorization": f"Bearer {API_KEY}"}
            ) as r:
                await r.read()  # raises if the connection died before the body was whole
                if r.status == 200:
                    answered.append(r.headers["X-Loopwatch-Step-Id"])
        except (TimeoutError, aiohttp.ClientError):
            return  # the gateway died under this request: it was never answered
        if killed.is_set():
            return


def _stored(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM steps")}


@pytest.mark.parametrize("whole_group", [True, False], ids=["gateway+recorder", "gateway"])
async def test_sigkill_loses_no_answered_record(
    provider: FakeProvider, tmp_path: Path, whole_group: bool
) -> None:
    provider.queue(*(lambda received, n=n: _reply(n) for n in range(4 * AGENTS * STEPS)))
    db, spool, port = tmp_path / "lw.db", tmp_path / "spool", _free_port()
    upstream = provider.url  # type: ignore[attr-defined]
    gateway = await _serve(db, spool, upstream, port)
    answered: list[str] = []
    killed = asyncio.Event()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            agents = [
                asyncio.ensure_future(_agent(session, url, i, answered, killed))
                for i in range(AGENTS)
            ]
            while len(answered) < AGENTS * STEPS // 2:
                await asyncio.sleep(0.005)
            # Mid-load: the other agents have requests in flight right now.
            if whole_group:
                os.killpg(gateway.pid, signal.SIGKILL)
            else:
                gateway.send_signal(signal.SIGKILL)
            killed.set()
            await asyncio.wait_for(asyncio.gather(*agents), 30)
        gateway.wait(10)
        kept = _stored(db) if db.exists() else set()
        assert len(set(answered) - kept) > 0 or whole_group is False  # records were in flight
        _spool_is_private(spool)
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
            gateway.wait(10)
    restarted = await _serve(db, spool, upstream, _free_port())
    try:
        for _ in range(600):
            lost = set(answered) - _stored(db)
            if not lost:
                break
            await asyncio.sleep(0.05)
        assert len(answered) >= AGENTS * STEPS // 2
        assert lost == set(), f"{len(lost)} of {len(answered)} answered requests lost"
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(30)


def _spool_is_private(spool: Path) -> None:
    files = list(spool.glob("*.spool"))
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert API_KEY.encode() not in path.read_bytes()


async def test_an_in_process_recorder_stores_an_earlier_runs_spool_first(
    make_gateway: Any, tmp_path: Path
) -> None:
    from gateway import records
    from gateway.spool import SpoolWriter
    from tests.conftest import build_step
    from tests.fakes.chat import completion as answer

    spool = tmp_path / "spool"
    crashed = SpoolWriter(spool, "w0")
    earlier = [build_step(f"earlier-{i}") for i in range(5)]
    for step in earlier:
        crashed.append(records.encode(step))
    crashed.close()
    gw = await make_gateway(spool_dir=str(spool), recorder_queue_size=3)
    gw.provider.queue(*(answer(f"now {i}") for i in range(4)))
    async with aiohttp.ClientSession() as session:
        for i in range(4):
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"q{i}"}]}
            async with session.post(gw.openai_base + "/chat/completions", json=body) as r:
                assert r.status == 200
            await gw.flush()  # within the bound of 3 waiting records
    for _ in range(200):
        traces = {t["id"] for t in await gw.traces(limit="50")}
        if len(traces) == 9:
            break
        await asyncio.sleep(0.05)
    assert {s.trace_id for s in earlier} <= traces and len(traces) == 9
    assert gw.deps.recorder.dropped_total == 0
