"""The recorder process: drains the gateway's spool (and spools it adopts) into the store,
off its event loop and GIL. It redacts what it stores (the gateway redacts only what it
exports, off its loop: sinks.redacted), batches writes, and stops when its stdin closes:
the gateway asked, or died. It imports only what recording needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.config import Settings
from gateway.mcp.redacted import redact_record
from gateway.recording import codec as records
from gateway.recording import ownership
from gateway.recording.codec import Record
from gateway.recording.drain import Drain
from gateway.recording.progress import empty_fifo, open_fifo_reader
from gateway.recording.recorder import Recorder, Submitted
from gateway.recording.spooler import SpoolRecorder
from gateway.redaction.redactor import Redactor, without_reasoning_summaries
from gateway.step import RefusalRecord, StepRecord
from gateway.store.engine import make_engine
from gateway.store.write.mcp import McpStore
from gateway.store.write.writer import StoreWriter

log = logging.getLogger(__name__)

STOP_SECONDS = 10.0  # how long a stopping drain may take to store what is spooled
_NICENESS = 5  # the gateway's requests come first; the recorder catches up when they pause


def transform(redactor: Redactor, keep_summaries: bool, item: Submitted) -> Record:
    """Spooled line → record → what may be stored: where records are redacted for storage
    (after the spool, for crash safety); exporters get theirs by the same rules from
    sinks.redacted."""
    record = records.decode(item) if isinstance(item, bytes) else item
    if isinstance(record, StepRecord):
        if not keep_summaries:
            record = without_reasoning_summaries(record)
        return redactor.redact_step(record)
    if isinstance(record, RefusalRecord):
        return redactor.redact_refusal(record)
    return redact_record(redactor, record)


class StoreWriters:
    """A batch's steps and refusals go to the step writer, its MCP records to the MCP
    writer (after them: an execution may name a step of the same batch). Both are
    idempotent, so a batch retried after a partial write is stored once."""

    def __init__(self, engine: Engine) -> None:
        self._steps = StoreWriter(engine)
        self._mcp = McpStore(engine)

    def write_batch(self, records: Sequence[Record]) -> None:
        steps = [r for r in records if isinstance(r, StepRecord | RefusalRecord)]
        if steps:
            self._steps.write_batch(steps)
        if len(steps) < len(records):
            self._mcp.write_batch(
                [r for r in records if not isinstance(r, StepRecord | RefusalRecord)]
            )


def make_recorder(settings: Settings, engine: Engine | None = None) -> Recorder:
    redactor = Redactor(settings.redaction)
    return Recorder(
        StoreWriters(engine or make_engine(settings.database_url)),
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
    *,
    adopt: bool = True,
) -> Drain:
    return Drain(
        directory,
        recorder,
        active=active,
        root=settings.spool_path() if adopt else None,
        batch_size=settings.recorder_batch_size,
        queue_size=settings.recorder_queue_size,
        local=local,
        gather_max=settings.recorder_flush_seconds,
    )


def start(
    owner: Background, settings: Settings, directory: Path, active: list[str]
) -> subprocess.Popen[bytes]:
    """Start the recorder process for these spool writers. It runs in its own session, so a
    Ctrl-C or a signal to the gateway's process group does not cut its drain short; it stops
    when its stdin closes (the gateway asks, or dies)."""
    process = owner.process(
        "recorder",
        [sys.executable, "-m", "gateway.recording.process"],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin is not None
    brief = pickle.dumps((settings, str(directory), active))
    process.stdin.write(len(brief).to_bytes(8, "little") + brief)
    process.stdin.flush()
    return process


class Keeper:
    """Keeps one recorder process running for a gateway: starts it, starts it again if it
    dies (its spool waits meanwhile), stops it; if it cannot store the spool at the stop
    (it was killed), the gateway stores it itself."""

    def __init__(
        self, owner: Background, settings: Settings, directory: Path, active: list[str]
    ) -> None:
        self._owner = owner
        self._args = (settings, directory, active)
        self.process = start(owner, *self._args)

    def check(self) -> None:
        if self.process.poll() is not None:
            log.error("recorder process exited (%s); starting it again", self.process.returncode)
            if self.process.stdin is not None:  # else each restart leaks the dead one's pipe
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            self.process = start(self._owner, *self._args)

    async def watch(self, every: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every)
            self.check()

    async def stop(self) -> None:
        if not await stop_process(self.process):
            log.warning("recorder process did not store the spool; the gateway stores it")
            await store_here(*self._args)


async def stop_process(process: subprocess.Popen[bytes]) -> bool:
    """Ask the recorder to store what is spooled and exit; whether it did."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(subprocess.TimeoutExpired):
        await loop.run_in_executor(None, process.wait, STOP_SECONDS + 5)
    if process.poll() is None:
        log.error("recorder process did not stop in time; its spool is stored at next start")
        process.kill()
        await loop.run_in_executor(None, process.wait)
    return process.returncode == 0


async def store_here(settings: Settings, directory: Path, active: list[str]) -> None:
    """The final drain, in this process: what the spool holds, within STOP_SECONDS."""
    recorder = make_recorder(settings)
    drain = make_drain(settings, directory, active, recorder, adopt=False)
    owner = Background()
    with ownership.hold(directory):
        recorder.start(owner)
        try:
            await drain.stop(timeout=STOP_SECONDS)
        finally:
            await owner.stop()


def main() -> None:
    # The gateway decides when this process stops (closing its stdin, or dying); a SIGTERM
    # to every process (systemd, a container stop) must not cut the drain short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    settings, directory, active = pickle.loads(_read_brief(sys.stdin.fileno()))
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(OSError):
        os.nice(_NICENESS)
    spool = Path(directory)
    with ownership.hold(spool):  # this spool is not adopted while the drain runs
        asyncio.run(_drain(settings, spool, active))


def _read_brief(fd: int) -> bytes:
    size = int.from_bytes(_read_exactly(fd, 8), "little")
    return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise SystemExit("recorder: the gateway went away before it started")
        data += chunk
    return data


async def _drain(settings: Settings, spool: Path, active: list[str]) -> None:
    drain = make_drain(settings, spool, active, make_recorder(settings))
    loop = asyncio.get_running_loop()
    fifo = open_fifo_reader(spool)
    stdin = sys.stdin.fileno()
    os.set_blocking(stdin, False)

    def woken() -> None:
        empty_fifo(fifo)
        drain.wake()

    def told() -> None:
        with contextlib.suppress(BlockingIOError):
            if not os.read(stdin, 4096):  # end of file: stop
                loop.remove_reader(stdin)
                drain.request_stop()

    loop.add_reader(fifo, woken)
    loop.add_reader(stdin, told)
    # What start-up built lives as long as the process: full collections scan only the
    # rest, and batches free what they make by reference counting (see ops.serving).
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    owner = Background()
    try:
        await drain.run(owner)
    finally:
        await owner.stop()
    if drain.replayed:
        log.info("recorder stored %d records of earlier runs from the spool", drain.replayed)


if __name__ == "__main__":
    main()
