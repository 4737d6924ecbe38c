"""How a gateway process records: a spool directory of its own under the spool root, held
while it runs, and the drain that stores it (a recorder process, or a task and thread here).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.config import Settings
from gateway.recording import ownership
from gateway.recording import process as recorder_process
from gateway.recording.spooler import WRITER_NAME, SpoolRecorder, writer_name


@contextlib.asynccontextmanager
async def recording(
    settings: Settings,
    engine: Engine,
    worker: int | None,
    spool: Path | None,
    owner: Background,
) -> AsyncIterator[SpoolRecorder]:
    """This process's spool writer, stored while the block runs and at its end. A worker of
    `serve --workers N` writes into `spool`, its parent's directory; the parent drains it."""
    if worker is not None:
        assert spool is not None, "a worker writes into its parent's spool directory"
        with ownership.hold(spool):
            recorder = SpoolRecorder(
                spool, writer_name(worker), queue_size=settings.recorder_queue_size
            )
            try:
                yield recorder
            finally:
                recorder.close()
        return
    with ownership.own(settings.spool_path()) as directory:
        recorder = SpoolRecorder(directory, WRITER_NAME, queue_size=settings.recorder_queue_size)
        if settings.recorder == "process":
            async with _in_a_process(settings, directory, recorder, owner):
                yield recorder
            return
        async with _in_this_process(settings, engine, directory, recorder, owner):
            yield recorder


@contextlib.asynccontextmanager
async def _in_a_process(
    settings: Settings, directory: Path, recorder: SpoolRecorder, owner: Background
) -> AsyncIterator[None]:
    keeper = recorder_process.Keeper(owner, settings, directory, [WRITER_NAME])
    watch = owner.task("recorder-watch", keeper.watch())
    try:
        yield
    finally:
        watch.cancel()
        recorder.close()
        await keeper.stop()


@contextlib.asynccontextmanager
async def _in_this_process(
    settings: Settings,
    engine: Engine,
    directory: Path,
    recorder: SpoolRecorder,
    owner: Background,
) -> AsyncIterator[None]:
    store = recorder_process.make_recorder(settings, engine)
    drain = recorder_process.make_drain(settings, directory, [WRITER_NAME], store, local=recorder)
    recorder.wake, recorder.hurry = drain.nudge, drain.wake
    task = owner.task("recorder-drain", drain.run(owner), stop=drain.request_stop)
    try:
        yield
    finally:
        recorder.close()
        drain.request_stop()
        await task
