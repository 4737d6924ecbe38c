"""The recorder process: drains the gateway's spool into the store, off its event loop and
GIL. It redacts (never the gateway), batches writes, and stops when told or when the
gateway dies; one runs at a time per spool directory (a lock file orders them).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from functools import partial
from multiprocessing.synchronize import Event as StopEvent
from pathlib import Path

from sqlalchemy.engine import Engine

from gateway import records
from gateway.config import Settings
from gateway.recorder import Recorder, Submitted
from gateway.recording import Drain, SpoolRecorder
from gateway.redaction import Redactor, without_reasoning_summaries
from gateway.step import RefusalRecord, StepRecord
from gateway.store.engine import make_engine
from gateway.store.writer import StoreWriter

log = logging.getLogger(__name__)

Record = StepRecord | RefusalRecord
STOP_SECONDS = 10.0  # how long a stopping drain may take to store what is spooled
_NICENESS = 5  # the gateway's requests come first; the recorder catches up when they pause


def transform(redactor: Redactor, keep_summaries: bool, item: Submitted) -> Record:
    """Spooled line → record → what may be stored: the only place records are redacted."""
    record = records.decode(item) if isinstance(item, bytes) else item
    if isinstance(record, StepRecord):
        if not keep_summaries:
            record = without_reasoning_summaries(record)
        return redactor.redact_step(record)
    return redactor.redact_refusal(record)


def make_recorder(settings: Settings, engine: Engine | None = None) -> Recorder:
    redactor = Redactor(settings.redaction)
    return Recorder(
        StoreWriter(engine or make_engine(settings.database_url)),
        transform=partial(transform, redactor, settings.store_reasoning_summary),
        queue_size=settings.recorder_queue_size,
        batch_size=settings.recorder_batch_size,
        flush_seconds=settings.recorder_flush_seconds,
    )


def make_drain(
    settings: Settings,
    directory: Path,
    active: list[str],
    recorder: Recorder,
    local: SpoolRecorder | None = None,
) -> Drain:
    return Drain(
        directory,
        recorder,
        active=active,
        poll_seconds=min(0.01, settings.recorder_flush_seconds),
        batch_size=settings.recorder_batch_size,
        queue_size=settings.recorder_queue_size,
        local=local,
    )


def start(
    settings: Settings, directory: Path, active: list[str]
) -> tuple[multiprocessing.process.BaseProcess, StopEvent]:
    """Spawn the recorder process for these spool writers."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    process = context.Process(
        target=main,
        args=(settings, str(directory), active, os.getpid(), stop),
        name="loopwatch-recorder",
    )
    process.start()
    return process, stop


class Keeper:
    """Keeps one recorder process running for a gateway: starts it, starts it again if it
    dies (its spool waits meanwhile), stops it."""

    def __init__(self, settings: Settings, directory: Path, active: list[str]) -> None:
        self._args = (settings, directory, active)
        self.process, self._stop = start(*self._args)

    def check(self) -> None:
        if not self.process.is_alive():
            log.error("recorder process exited (%s); starting it again", self.process.exitcode)
            self.process, self._stop = start(*self._args)

    async def watch(self, every: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every)
            self.check()

    async def stop(self) -> None:
        await stop_process(self.process, self._stop)


async def stop_process(process: multiprocessing.process.BaseProcess, stop: StopEvent) -> None:
    """Ask the recorder to store what is spooled and exit; the spool keeps what it could not."""
    stop.set()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, process.join, STOP_SECONDS + 5)
    if process.is_alive():
        log.error("recorder process did not stop in time; its spool is stored at next start")
        process.kill()
        await loop.run_in_executor(None, process.join, 5)


def main(
    settings: Settings, directory: str, active: list[str], parent: int, stop: StopEvent
) -> None:
    # The gateway decides when this process stops (stop event, or its own death); a Ctrl-C
    # or SIGTERM to the whole process group must not cut the drain short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(OSError):
        os.nice(_NICENESS)
    spool = Path(directory)
    with (spool / "recorder.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # an earlier run's drain finishes first

        def gone() -> bool:
            return stop.is_set() or os.getppid() != parent

        asyncio.run(_drain(settings, spool, active, gone))


async def _drain(
    settings: Settings, spool: Path, active: list[str], gone: Callable[[], bool]
) -> None:
    drain = make_drain(settings, spool, active, make_recorder(settings))
    await drain.run(should_stop=gone)
    if drain.replayed:
        log.info("recorder stored %d records of an earlier run from the spool", drain.replayed)
