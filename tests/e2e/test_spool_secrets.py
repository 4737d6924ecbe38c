"""Spooled text is unredacted: once stored it is gone from the spool, while the gateway runs
and after a clean stop, with no later gateway needed to clean up."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import stat
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.chat import completion
from tests.fakes.provider import FakeProvider
from tests.harness import provider  # noqa: F401
from tests.processes import Served, serving

pytestmark = pytest.mark.sqlite


def secret(n: int) -> str:
    """A key the redactor knows: the store holds a marker in its place."""
    return f"sk-proj-SpoolLeak{n:02d}MaterialAbcdefghij"


def holders(*directories: Path, needle: str) -> list[Path]:
    """Every regular file under `directories` that holds `needle` (the wake-up FIFO and
    other special files are not read)."""
    found = []
    for directory in directories:
        for path in directory.rglob("*"):
            if stat.S_ISREG(path.lstat().st_mode) and needle.encode() in path.read_bytes():
                found.append(path)
    return found


async def ask(served: Served, n: int) -> str:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"use {secret(n)}"}]}
    headers = {"Authorization": "Bearer sk-test-client-key-0123456789abcdef"}
    async with (
        aiohttp.ClientSession() as s,
        s.post(served.url + "/v1/chat/completions", json=body, headers=headers) as r,
    ):
        assert r.status == 200, await r.text()
        return r.headers["X-Loopwatch-Step-Id"]


async def until(check: Any, seconds: float = 20.0) -> bool:
    """Whether `check()` became true within `seconds` (a bound, not a timing)."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return bool(check())


def stored_steps(database: Path) -> set[str]:
    with sqlite3.connect(database) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM steps")}


async def test_stored_text_leaves_the_spool_while_running_and_at_a_clean_stop(
    provider: FakeProvider,
    tmp_path: Path,
) -> None:
    store, spool = tmp_path / "store", tmp_path / "spool"
    store.mkdir()
    database = store / "lw.db"
    for n in range(2):
        provider.queue(completion(f"done with {secret(10 + n)}"))
    settings = {
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{database}",
        "LOOPWATCH_SPOOL_DIR": str(spool),
        "LOOPWATCH_UPSTREAM_URL": provider.url,  # type: ignore[attr-defined]
    }
    async with serving(**settings) as served:
        first = await ask(served, 1)
        assert await until(lambda: first in stored_steps(database))
        # Stored: its text (the request's and the answer's) leaves the spool promptly.
        for needle in (secret(1), secret(10)):
            assert await until(lambda needle=needle: not holders(spool, needle=needle))
        second = await ask(served, 2)
        served.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(served.process.wait(), 60) == 0
    assert second in stored_steps(database)  # the clean stop stored it
    leaks = {n: holders(spool, store, needle=secret(n)) for n in (1, 2, 10, 11)}
    assert leaks == {1: [], 2: [], 10: [], 11: []}
