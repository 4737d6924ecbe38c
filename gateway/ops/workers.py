"""`serve --workers N`: N gateway processes sharing the port (SO_REUSEPORT) and the store,
one recorder process draining all their spools. Budgets stay exact (every process reserves
in the ledger's database); a worker that dies is started again.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import sys
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType

from aiohttp import web

from gateway.app import create_app
from gateway.background import Background
from gateway.config import Settings
from gateway.errors import StartupError
from gateway.ops.serving import new_event_loop, settle_heap, store_errors, store_failure
from gateway.recording import ownership
from gateway.recording import process as recorder_process
from gateway.recording.spooler import writer_name
from gateway.store.engine import create_schema, install_secret, make_engine
from gateway.store.holder import holding

log = logging.getLogger(__name__)

STOP_SECONDS = 30.0  # for in-flight requests of stopping workers


def serve(settings: Settings) -> int:
    """Run the workers until SIGTERM or SIGINT; then stop them, then the recorder.

    This process and each worker share the hold on a SQLite store (they count budgets in
    its ledger file): a gateway counting in its memory cannot start beside them, nor they
    beside it. A start-up failure is one line on stderr and exit 2.
    """
    try:
        with holding(settings.database_url, alone=False):
            return _serve(settings)
    except StartupError as exc:
        print(f"loopwatch: {exc}", flush=True, file=sys.stderr)
    except store_errors() as exc:  # the schema made before any worker starts
        failure = store_failure(settings.database_url, exc)
        print(f"loopwatch: {failure}", flush=True, file=sys.stderr)
    return 2


def _serve(settings: Settings) -> int:
    engine = make_engine(settings.database_url)
    create_schema(engine)  # once, before N processes race to it
    install_secret(engine)
    engine.dispose()
    logging.getLogger("loopwatch").info(
        "loopwatch listening on http://%s:%s with %d workers (upstream %s)",
        settings.host,
        settings.port,
        settings.workers,
        settings.upstream_url,
    )
    names = [writer_name(i) for i in range(settings.workers)]
    with ownership.own(settings.spool_path()) as directory:
        owner = Background()  # this supervisor's: the recorder process
        recorder = recorder_process.Keeper(owner, settings, directory, names)
        workers = {i: _start(settings, i, directory) for i in range(settings.workers)}
        stopping: list[int] = []

        def on_signal(number: int, frame: FrameType | None) -> None:
            stopping.append(number)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        while not stopping:
            wait([w.sentinel for w in workers.values()], timeout=0.5)
            if not stopping:
                recorder.check()
            for index, worker in list(workers.items()):
                if not worker.is_alive() and not stopping:
                    log.error("worker %d exited (%s); starting it again", index, worker.exitcode)
                    time.sleep(0.5)  # a worker that cannot start must not spin
                    workers[index] = _start(settings, index, directory)
        _stop(list(workers.values()))
        owner.adopt("recorder", recorder.stop)
        asyncio.run(owner.stop())
    return 0


def _start(settings: Settings, index: int, spool: Path) -> BaseProcess:
    context = multiprocessing.get_context("spawn")
    process = context.Process(
        target=_worker, args=(settings, index, spool), name=f"loopwatch-w{index}"
    )
    process.start()
    return process


def _stop(workers: list[BaseProcess]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.terminate()  # SIGTERM: aiohttp finishes in-flight requests, then cleans up
    deadline = time.monotonic() + STOP_SECONDS
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join(5)


async def _settled(app: web.Application) -> None:
    settle_heap()


def _worker(settings: Settings, index: int, spool: Path) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops workers with SIGTERM
    sys.setswitchinterval(0.0005)
    app = create_app(settings, worker=index, spool=spool)
    app.on_startup.append(_settled)  # after the app's own start-up (its cleanup contexts)
    # Held by each worker too: one outliving a killed parent still keeps others out.
    with holding(settings.database_url, alone=False):
        _run(app, settings)


def _run(app: web.Application, settings: Settings) -> None:
    web.run_app(
        app,
        host=settings.host,
        port=settings.port,
        reuse_port=True,
        print=None,
        access_log=None,
        handler_cancellation=True,
        auto_decompress=False,  # request bodies are decoded by the gateway (gateway.stream.codings)
        loop=new_event_loop(),
        handle_signals=True,
    )
