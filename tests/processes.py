"""`loopwatch serve` (or `replay`) as a real subprocess: started on a free port, its stderr
collected."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

LISTENING = re.compile(rb"listening on (http://[^ ,\"]+)")


def environment(**settings: str) -> dict[str, str]:
    """This process's environment without LOOPWATCH_* variables, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    return {**env, **settings}


def run_serve(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """`loopwatch serve` expected to stop by itself (a start-up failure)."""
    return subprocess.run(
        [sys.executable, "-m", "gateway", "serve", *args],
        env=environment(**settings),
        capture_output=True,
        text=True,
        timeout=120,
    )


@dataclass
class Served:
    url: str
    process: asyncio.subprocess.Process
    stderr: list[bytes] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [line.decode().rstrip("\n") for line in self.stderr]


@contextlib.asynccontextmanager
async def serving(*args: str, command: str = "serve", **settings: str) -> AsyncIterator[Served]:
    """A gateway subprocess on a free port; stopped with SIGTERM when the block ends."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        command,
        "--port",
        "0",
        *args,
        env=environment(**settings),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: list[bytes] = []
    url = None
    while url is None:
        line = await asyncio.wait_for(process.stderr.readline(), 120)
        assert line, f"{command} exited before listening: {b''.join(lines).decode()}"
        lines.append(line)
        found = LISTENING.search(line)
        url = found.group(1).decode() if found else None
    reader = asyncio.create_task(_collect(process.stderr, lines))
    served = Served(url, process, lines)
    try:
        yield served
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
        await reader


async def _collect(stream: asyncio.StreamReader, lines: list[bytes]) -> None:
    while line := await stream.readline():
        lines.append(line)
