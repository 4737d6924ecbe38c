"""One owner of background work: only gateway/background.py starts tasks, threads and
processes; it stops them last started first, logs a failing task, and a gateway's clean stop
leaves nothing of its own running.

Scanned: create_task, ensure_future, Thread, Timer, Popen, create_subprocess_exec/_shell and
multiprocessing's Process. Not scanned: asyncio.to_thread and run_in_executor, calls whose
caller awaits the result on a pool that outlives no one (the loop's default pool, or one its
component shuts down), so nothing is left running behind the caller.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import threading
from pathlib import Path

import pytest

from gateway.background import Background

ROOT = Path(__file__).resolve().parents[1]
SPAWNS = {
    "create_task",
    "ensure_future",
    "Thread",
    "Timer",
    "Popen",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "Process",
}
ALLOWED = {
    # The owner itself.
    ("gateway/background.py", "create_task"),
    ("gateway/background.py", "Thread"),
    ("gateway/background.py", "Popen"),
    # `loopwatch mcp-stdio` is a program of its own beside an agent, not the gateway: a child
    # and two daemon threads that end with it, stopped by its child's exit and stdin's end.
    ("gateway/ops/mcp_stdio.py", "Popen"),
    ("gateway/ops/mcp_stdio.py", "Thread"),
    # The parent of `serve --workers N` runs no event loop: it supervises its worker
    # processes (starts, restarts, stops them on a signal) in its own loop of waits.
    ("gateway/ops/workers.py", "Process"),
    # The pytest plugin's `loopwatch` fixture runs a test's gateway on a thread with its own
    # event loop (sync tests have none), started and joined by the fixture around each test.
    ("gateway/testing/loop_thread.py", "Thread"),
}


def _spawns() -> set[tuple[str, str]]:
    found = set()
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in SPAWNS:
                found.add((path.relative_to(ROOT).as_posix(), name))
    return found


def test_only_the_owner_starts_background_work() -> None:
    assert sorted(_spawns() - ALLOWED) == []


def test_the_allow_list_names_no_spawn_that_is_gone() -> None:
    assert sorted(ALLOWED - _spawns()) == []


async def test_the_owner_stops_last_started_first() -> None:
    owner = Background(grace=1.0)
    stopped: list[str] = []

    async def close(name: str) -> None:
        stopped.append(name)

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append(name)

    halt = threading.Event()
    owner.adopt("first", lambda: close("first"))
    owner.task("second", forever("second"))
    owner.thread("third", lambda: (halt.wait(), stopped.append("third")), stop=halt.set)
    child = owner.child("fourth")
    owner.adopt("fifth", lambda: close("fifth"))
    child.task("fourth", forever("fourth"))  # started later, stopped at its owner's place
    await asyncio.sleep(0)
    await owner.stop()
    assert stopped == ["fifth", "fourth", "third", "second", "first"]
    assert len(owner) == 0


async def test_a_failing_task_is_logged_and_forgotten(caplog: pytest.LogCaptureFixture) -> None:
    owner = Background()

    async def broken() -> None:
        raise RuntimeError("boom")

    task = owner.task("broken", broken())
    await asyncio.wait((task,))
    await asyncio.sleep(0)
    assert len(owner) == 0
    assert any("broken failed" in r.getMessage() for r in caplog.records)
    assert all(r.levelno <= logging.ERROR for r in caplog.records)


async def test_a_process_that_ignores_its_stop_is_terminated() -> None:
    import sys

    owner = Background(grace=0.2)
    process = owner.process("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    await owner.stop()
    assert process.poll() is not None
