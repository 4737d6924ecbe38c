"""The recorder sleeps until a record is spooled: idle, it wakes only for its look (every
2 s) for spools of stopped gateways; a record wakes it at once. A real `loopwatch serve`."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
from pathlib import Path

import aiohttp
import pytest

from gateway.recording.progress import open_fifo_reader
from gateway.recording.spooler import SpoolRecorder
from tests.factories import build_step, chat_request
from tests.fakes.chat import completion
from tests.fakes.provider import FakeProvider
from tests.harness import provider  # noqa: F401
from tests.processes import serving

WAKEUPS = re.compile(r"^loopwatch_recorder_wakeups_total (\S+)$", re.MULTILINE)


async def _wakeups(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(url + "/metrics") as r:
        found = WAKEUPS.search(await r.text())
    assert found, "no wakeup counter in /metrics"
    return float(found.group(1))


async def test_an_idle_recorder_sleeps_and_a_record_wakes_it(
    provider: FakeProvider, tmp_path: Path
) -> None:
    db = tmp_path / "lw.db"
    provider.queue(completion("hello"))
    settings = {
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{db}",
        "LOOPWATCH_UPSTREAM_URL": provider.url,  # type: ignore[attr-defined]
    }
    async with serving(**settings) as served, aiohttp.ClientSession() as session:
        await asyncio.sleep(1.0)  # the recorder process is up and has caught up
        before = await _wakeups(session, served.url)
        await asyncio.sleep(2.0)
        idle = await _wakeups(session, served.url) - before
        assert idle <= 2, f"{idle} wakeups in an idle 2 s: the recorder polls"
        body = chat_request("hi")
        async with session.post(served.url + "/v1/chat/completions", json=body) as r:
            assert r.status == 200
        for _ in range(80):  # before the next look for spools (every 2 s)
            with sqlite3.connect(db) as conn:
                if conn.execute("SELECT count(*) FROM steps").fetchone()[0] == 1:
                    break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the record was not stored within 0.8 s")


async def test_records_spooled_together_poke_a_sleeping_drain_once(tmp_path: Path) -> None:
    """A burst of records wakes the recorder process once, not once a record; its next
    sleep is poked again."""
    recorder = SpoolRecorder(tmp_path, "w0", queue_size=1000)
    reader = open_fifo_reader(tmp_path)
    try:
        recorder.progress.publish({"sleeping": 1})
        for _ in range(20):
            recorder.submit(build_step())
        assert os.read(reader, 100) == b"w"
        recorder.submit(build_step())  # the same sleep: the drain is woken already
        with pytest.raises(BlockingIOError):
            os.read(reader, 100)
        recorder.progress.publish({"sleeping": 2})  # it woke, read, and sleeps again
        recorder.submit(build_step())
        assert os.read(reader, 100) == b"w"
    finally:
        recorder.close()
        os.close(reader)
