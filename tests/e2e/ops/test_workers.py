"""`serve --workers 2`: two processes on one port share the store; budgets stay exact and a
graceful stop stores every record."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.fakes.chat import completion
from tests.fakes.provider import FakeProvider
from tests.harness import provider  # noqa: F401


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_two_workers_share_the_port_and_hold_the_budget(
    provider: FakeProvider, tmp_path: Path
) -> None:
    provider.queue(*(completion(f"answer {i}") for i in range(60)))
    port, db, spool = _free_port(), tmp_path / "lw.db", tmp_path / "spool"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")},
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{db}",
        "LOOPWATCH_SPOOL_DIR": str(spool),
        "LOOPWATCH_UPSTREAM_URL": provider.url,  # type: ignore[attr-defined]
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--workers", "2", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(600):  # both workers up: each has opened its spool
                try:
                    async with session.get(url + "/healthz") as r:
                        if r.status == 200 and len(list(spool.glob("w*.progress"))) == 2:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the second one's listener follows its spool

            async def ask(trace: str, i: int) -> int:
                body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"q{i}"}]}
                headers = {"X-Loopwatch-Trace-Id": trace, "X-Loopwatch-Max-Steps": "5"}
                # A new connection each: the kernel spreads them over both workers.
                async with (
                    aiohttp.ClientSession() as fresh,
                    fresh.post(url + "/v1/chat/completions", json=body, headers=headers) as r,
                ):
                    await r.read()
                    return r.status

            statuses = await asyncio.gather(*(ask("shared-run", i) for i in range(24)))
            others = await asyncio.gather(*(ask(f"run-{i}", i) for i in range(20)))
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert sorted(statuses).count(200) == 5  # exact across both processes
    assert others == [200] * 20
    served = {p.name.split("-")[0] for p in spool.rglob("*.spool") if p.stat().st_size}
    assert served == {"w0", "w1"}  # both workers answered requests
    with sqlite3.connect(db) as conn:
        steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        refused = conn.execute(
            "SELECT count(*) FROM violations WHERE kind = 'step_budget_exceeded'"
        ).fetchone()[0]
    assert (steps, refused) == (25, 19)  # every record stored by the graceful stop
