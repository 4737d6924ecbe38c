"""A gateway's clean stop leaves nothing of its own running: its owner of background work is
empty, no task is left on the loop, and no thread of its is alive."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from aiohttp import web

from gateway.app import BACKGROUND, create_app
from gateway.config import Settings


def _ours() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("loopwatch"))


@pytest.mark.parametrize("recorder", ["process", "thread"])
async def test_a_clean_stop_leaves_nothing_running(tmp_path: Path, recorder: str) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'store.db'}",
        spool_dir=str(tmp_path / "spool"),
        recorder=recorder,
        retention_days=30,
    )
    before = _ours()
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    owner = app[BACKGROUND]
    assert len(owner) > 0  # the recorder's drain, retention, the key load …
    await runner.cleanup()
    assert len(owner) == 0
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for _ in range(50):  # a pool's idle thread ends once it sees the pool shut down
        if _ours() == before:
            break
        await asyncio.sleep(0.05)
    assert _ours() == before
