"""A gateway stopped any way loses no record of a request it answered.

A real `loopwatch serve` (its recorder process included) is sent SIGKILL or SIGTERM, alone
or with its process group and recorder, in its first second or mid-run, while 20 agents have
requests in flight; a gateway on another port (restarted, or a replica already running
beside it on PostgreSQL) stores the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import Database
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


async def _serve(
    db: Path, spool: Path, upstream: str, port: int, **settings: str
) -> subprocess.Popen[bytes]:
    """`loopwatch serve` in a process group of its own, once it answers; `settings` are
    more LOOPWATCH_ variables."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")},
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{db}",
        "LOOPWATCH_SPOOL_DIR": str(spool),
        "LOOPWATCH_UPSTREAM_URL": upstream,
        "LOOPWATCH_PORT": str(port),
        # A long batching delay: at the kill, records wait in the spool, not in the store.
        "LOOPWATCH_RECORDER_FLUSH_SECONDS": "2",
        "LOOPWATCH_RECORDER_BATCH_SIZE": "1000",
        **{f"LOOPWATCH_{name.upper()}": value for name, value in settings.items()},
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


def _stored(db: Path | Database) -> set[str]:
    with sqlite3.connect(db) if isinstance(db, Path) else db.raw_connect() as conn:
        return {row[0] for row in conn.execute("SELECT id FROM steps")}


def _recorder_of(gateway: subprocess.Popen[bytes]) -> int | None:
    """The recorder process a gateway started (in a session of its own)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except (OSError, ValueError):
            continue
        if parent == gateway.pid and b"gateway.recording.process" in command:
            return int(entry)
    return None


async def _load_then_kill(
    gateway: subprocess.Popen[bytes], port: int, kill: Callable[[], None], enough: int
) -> list[str]:
    """20 agents in flight; `kill` once `enough` requests were answered. What was answered."""
    answered: list[str] = []
    killed = asyncio.Event()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        agents = [
            asyncio.ensure_future(_agent(session, url, i, answered, killed)) for i in range(AGENTS)
        ]
        while len(answered) < enough:
            await asyncio.sleep(0.002)
        kill()  # the other agents have requests in flight right now
        killed.set()
        await asyncio.wait_for(asyncio.gather(*agents), 30)
    return answered


async def _all_stored(db: Path | Database, answered: list[str], seconds: float) -> set[str]:
    """The answered requests still missing from the store after waiting up to `seconds`."""
    lost = set(answered)
    for _ in range(int(seconds / 0.05)):
        lost = set(answered) - _stored(db)
        if not lost:
            break
        await asyncio.sleep(0.05)
    return lost


def _killer(
    gateway: subprocess.Popen[bytes], sig: signal.Signals, target: str
) -> Callable[[], None]:
    def kill() -> None:
        recorder = _recorder_of(gateway)
        if target == "group":
            # Ctrl-C, systemd, a container stop: the gateway's group, and its recorder too.
            os.killpg(gateway.pid, sig)
            if recorder is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(recorder, sig)
        else:
            gateway.send_signal(sig)

    return kill


@pytest.mark.parametrize("moment", ["first-second", "mid-run"])
@pytest.mark.parametrize("target", ["gateway", "group"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
async def test_a_stopped_gateway_loses_no_answered_record(
    provider: FakeProvider, tmp_path: Path, sig: signal.Signals, target: str, moment: str
) -> None:
    provider.queue(*(lambda received, n=n: _reply(n) for n in range(4 * AGENTS * STEPS)))
    db, spool, port = tmp_path / "lw.db", tmp_path / "spool", _free_port()
    upstream = provider.url  # type: ignore[attr-defined]
    gateway = await _serve(db, spool, upstream, port)
    enough = AGENTS if moment == "first-second" else AGENTS * STEPS // 2
    try:
        answered = await _load_then_kill(gateway, port, _killer(gateway, sig, target), enough)
        gateway.wait(30)
        _spool_is_private(spool)
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
            gateway.wait(10)
    assert len(answered) >= enough
    if sig == signal.SIGTERM:  # a graceful stop stores everything before it exits
        lost = set(answered) - _stored(db)
        assert lost == set(), f"{len(lost)} of {len(answered)} answered requests not stored"
        return  # (a restart then has nothing left to store)
    restarted = await _serve(db, spool, upstream, _free_port())  # another port
    try:
        lost = await _all_stored(db, answered, 30)
        assert lost == set(), f"{len(lost)} of {len(answered)} answered requests lost"
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(30)


async def test_a_graceful_stop_stores_everything_when_the_recorder_was_killed(
    provider: FakeProvider, tmp_path: Path
) -> None:
    provider.queue(*(lambda received, n=n: _reply(n) for n in range(4 * AGENTS * STEPS)))
    db, spool, port = tmp_path / "lw.db", tmp_path / "spool", _free_port()
    gateway = await _serve(db, spool, provider.url, port)  # type: ignore[attr-defined]

    def kill() -> None:
        recorder = _recorder_of(gateway)
        assert recorder is not None
        os.kill(recorder, signal.SIGKILL)
        gateway.send_signal(signal.SIGTERM)

    try:
        answered = await _load_then_kill(gateway, port, kill, AGENTS * STEPS // 2)
        assert gateway.wait(60) == 0
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
    lost = set(answered) - _stored(db)  # before any restart: the gateway stored them itself
    assert lost == set(), f"{len(lost)} of {len(answered)} answered requests not stored"


@pytest.mark.postgres
async def test_a_running_gateway_adopts_the_spool_of_one_killed_beside_it(
    provider: FakeProvider, tmp_path: Path, postgres_database: Database
) -> None:
    """Two replicas sharing a spool root, on PostgreSQL (a SQLite file has one gateway)."""
    provider.queue(*(lambda received, n=n: _reply(n) for n in range(4 * AGENTS * STEPS)))
    db, spool = postgres_database, tmp_path / "spool"
    upstream, store = provider.url, {"database_url": db.url}  # type: ignore[attr-defined]
    survivor = await _serve(tmp_path / "lw.db", spool, upstream, _free_port(), **store)
    port = _free_port()
    doomed = await _serve(tmp_path / "lw.db", spool, upstream, port, **store)
    try:
        kill = _killer(doomed, signal.SIGKILL, "group")
        answered = await _load_then_kill(doomed, port, kill, AGENTS * STEPS // 2)
        doomed.wait(10)
        lost = await _all_stored(db, answered, 30)  # no restart: the survivor stores them
        assert lost == set(), f"{len(lost)} of {len(answered)} answered requests lost"
        for _ in range(100):  # and, stored, the dead gateway's spool is gone
            if len([d for d in spool.iterdir() if d.is_dir()]) == 1:
                break
            await asyncio.sleep(0.05)
        assert len([d for d in spool.iterdir() if d.is_dir()]) == 1
    finally:
        for gateway in (doomed, survivor):
            if gateway.poll() is None:
                gateway.send_signal(signal.SIGTERM)
                gateway.wait(30)


def _spool_is_private(spool: Path) -> None:
    files = list(spool.rglob("*.spool"))
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert API_KEY.encode() not in path.read_bytes()


async def test_an_in_process_recorder_stores_an_earlier_runs_spool_first(
    make_gateway: Any, tmp_path: Path
) -> None:
    from gateway.recording import codec as records
    from gateway.recording.spool import SpoolWriter
    from tests.factories import build_step
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
