"""A test's gateway: started before it, its traces saved as cassettes after it when
recording, and, when replaying, its upstream a replay server of the test's cassettes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gateway.app import DEPS, create_app
from gateway.config import Settings
from gateway.config_load import load_settings
from gateway.replay import server as replay_server
from gateway.testing import cassettes
from gateway.testing.divergences import Divergences
from gateway.testing.handle import Loopwatch
from gateway.testing.loop_thread import LoopThread
from gateway.testing.served import Served


@contextlib.contextmanager
def run_for_test(
    nodeid: str,
    scratch: Path,
    *,
    upstream: str | None,
    record: str | None,
    replay: str | None,
) -> Iterator[tuple[Loopwatch, Divergences]]:
    """The handle the test gets and what its replay met (filled as it runs)."""
    settings = _settings(scratch, upstream)
    divergences = Divergences()
    thread = LoopThread()
    started: list[Served] = []
    try:
        if replay is not None:
            steps = cassettes.load(cassettes.folder(replay, nodeid))
            app = replay_server.create_app(steps, settings, live=False)
            divergences.watch(app)
            player = _start(thread, Served(app, gateway=False), started)
            settings = settings.model_copy(
                update={
                    "upstream_url": f"{player.url}/v1",
                    "anthropic_upstream_url": player.url,
                    "routes": (),
                }
            )
        gateway = _start(thread, Served(create_app(settings), gateway=True), started)
        handle = Loopwatch(thread, gateway)
        yield handle, divergences
        if record is not None:
            ids = [trace["id"] for trace in handle.traces()]
            cassettes.save(gateway.app[DEPS].engine, ids, cassettes.folder(record, nodeid))
    finally:
        for served in reversed(started):
            thread.run(served.stop())
        thread.close()


def _settings(scratch: Path, upstream: str | None) -> Settings:
    """The usual settings (LOOPWATCH_* variables, the config file), on a store of the test's
    own that the gateway writes as soon as it can."""
    overrides: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "workers": 1,  # one app in this process
        "database_url": f"sqlite:///{scratch / 'loopwatch.db'}",
        "spool_dir": str(scratch / "spool"),
        "recorder": "thread",
        "recorder_flush_seconds": 0.01,
        "upstream_url": upstream,
    }
    return load_settings(overrides)


def _start(thread: LoopThread, served: Served, started: list[Served]) -> Served:
    thread.run(served.start())
    started.append(served)
    return served
