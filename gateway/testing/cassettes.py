"""A test's cassettes on disk: its traces written as `DIR/<test id>/<n>.jsonl` in the order
they started, and read back as one tape for the replay server."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy.engine import Engine

from gateway.replay import tape
from gateway.replay.tape import Step
from gateway.ui.api import version
from gateway.ui.cassette import cassette_lines


def folder(root: str, nodeid: str) -> Path:
    """The test's own folder: its node id with what a file name cannot hold replaced."""
    return Path(root) / re.sub(r"[^A-Za-z0-9_.\[\]-]+", "-", nodeid).strip("-")


def save(engine: Engine, trace_ids: list[str], where: Path) -> list[Path]:
    """Each trace as a cassette, numbered from 1; cassettes of an earlier recording go."""
    where.mkdir(parents=True, exist_ok=True)
    for old in where.glob("*.jsonl"):
        old.unlink()
    written = []
    for number, trace_id in enumerate(trace_ids, 1):
        lines = cassette_lines(engine, trace_id, version())
        if lines is None:
            continue
        path = where / f"{number}.jsonl"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        written.append(path)
    return written


def load(where: Path) -> list[Step]:
    """The test's cassettes as one tape, in the order they were recorded.

    The tapes are played one after the other: the player answers each request with the next
    recorded step, so a second trace's requests find their cassette when the first trace's
    steps are used up. An agent that runs its traces in the recorded order replays whatever
    their number; one that interleaves them differently diverges, which is what it did.
    """
    paths = sorted(where.glob("*.jsonl"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    if not paths:
        raise FileNotFoundError(
            f"no cassettes in {where}: record them first with --loopwatch-record"
        )
    steps: list[Step] = []
    for path in paths:
        steps += tape.read(str(path))[1]
    return steps
