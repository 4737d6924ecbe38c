"""Gateways on one SQLite file: budgets stay exact for every way `serve` can be started on
it. A gateway counting in its memory holds the file alone; a second one refuses to start in
one line naming PostgreSQL; a killed gateway never blocks the next start."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.chat import completion
from tests.fakes.provider import FakeProvider
from tests.harness import provider  # noqa: F401
from tests.processes import LISTENING, environment, run_serve, serving

pytestmark = pytest.mark.sqlite

REFUSAL = (
    "loopwatch: database {db} is in use by another loopwatch gateway: one gateway per SQLite "
    "file (`serve --workers N` for more processes); run several gateways on PostgreSQL"
)


@dataclass
class Started:
    """A `serve` that either listens (`url`) or exited at start-up (`url` None)."""

    process: asyncio.subprocess.Process
    url: str | None
    lines: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def started(*args: str, **settings: str) -> AsyncIterator[Started]:
    """`loopwatch serve` on a free port: yielded once it listens or has exited."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", "--port", "0", *args,
        env=environment(**settings),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    run = Started(process, None)
    while run.url is None and (line := await asyncio.wait_for(process.stderr.readline(), 120)):
        run.lines.append(line.decode().rstrip("\n"))
        found = LISTENING.search(line)
        run.url = found.group(1).decode() if found else None
    try:
        yield run
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 60)


async def burst(urls: list[str], count: int, trace: str) -> list[int]:
    """`count` concurrent requests of one trace with a budget of 5 steps, spread over `urls`."""

    async def ask(i: int) -> int:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"q{i}"}]}
        headers = {"X-Loopwatch-Trace-Id": trace, "X-Loopwatch-Max-Steps": "5"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                urls[i % len(urls)] + "/v1/chat/completions", json=body, headers=headers
            ) as r,
        ):
            await r.read()
            return r.status

    return list(await asyncio.gather(*(ask(i) for i in range(count))))


def _settings(db: Path, provider: FakeProvider) -> dict[str, str]:
    return {
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{db}",
        "LOOPWATCH_UPSTREAM_URL": provider.url,  # type: ignore[attr-defined]
        "LOOPWATCH_RECORDER": "thread",  # fewer processes; the ledger is the same
    }


async def test_a_second_gateway_on_one_sqlite_file_never_doubles_a_budget(
    provider: FakeProvider, tmp_path: Path
) -> None:
    """Two `serve` on one file, 12 concurrent requests of a 5-step trace split between
    them: 5 reach the provider, and the second gateway refuses to start, saying why."""
    provider.queue(*(completion(f"answer {i}") for i in range(12)))
    db = tmp_path / "lw.db"
    settings = _settings(db, provider)
    async with serving(**settings) as first, started(**settings) as second:
        urls = [first.url] + ([second.url] if second.url else [])
        statuses = await burst(urls, 12, "shared-run")
        # Opening the store for maintenance is never refused while the gateway runs.
        fingerprint = subprocess.run(
            [sys.executable, "-m", "gateway", "key-fingerprint", "--database-url", f"sqlite:///{db}"],
            input="sk-some-key\n", capture_output=True, text=True, timeout=60,
            env=environment(),
        )  # fmt: skip
    assert len(provider.received) == 5
    assert statuses.count(200) == 5 and statuses.count(429) == 7
    assert second.url is None and second.process.returncode == 2
    assert second.lines == [REFUSAL.format(db=db)]
    assert fingerprint.returncode == 0, fingerprint.stderr


async def test_a_killed_gateway_does_not_block_the_next_start(
    provider: FakeProvider, tmp_path: Path
) -> None:
    provider.queue(*(completion(f"answer {i}") for i in range(12)))
    settings = _settings(tmp_path / "lw.db", provider)
    async with serving(**settings) as doomed:
        assert await burst([doomed.url], 3, "run") == [200] * 3
        doomed.process.kill()  # SIGKILL: no clean-up of its own
        await doomed.process.wait()
    async with started(**settings) as next_one:
        assert next_one.url is not None, next_one.lines
        statuses = await burst([next_one.url], 6, "another-run")
    assert sorted(statuses) == [200] * 5 + [429]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _answering(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url + "/healthz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.05)
    raise AssertionError(f"{url} never answered")


async def test_a_gateway_with_workers_and_a_one_process_one_never_share_a_file(
    provider: FakeProvider, tmp_path: Path
) -> None:
    """`serve --workers 2` counts in the ledger file, a one-process `serve` in its memory:
    whichever starts second on the file refuses, in the same one line."""
    db = tmp_path / "lw.db"
    settings = _settings(db, provider)
    port = str(_free_port())
    async with serving(**settings):
        beside = await asyncio.to_thread(run_serve, "--workers", "2", "--port", port, **settings)
    assert (beside.returncode, beside.stderr.splitlines()) == (2, [REFUSAL.format(db=db)])
    with_workers = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--workers", "2", "--port", port],
        env=environment(**settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _answering(f"http://127.0.0.1:{port}")
        one = await asyncio.to_thread(run_serve, "--port", "0", **settings)
    finally:
        with_workers.send_signal(signal.SIGTERM)
        with_workers.wait(60)
    assert (one.returncode, one.stderr.splitlines()) == (2, [REFUSAL.format(db=db)])
    assert with_workers.returncode == 0
