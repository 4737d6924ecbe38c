"""`loopwatch serve`: bind the port, open the store, say where it listens, serve until a signal.

The port is bound first and the store opened second; only when both have succeeded is
"listening" logged. Either failing is a StartupError: one line naming the cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from gateway.app import create_app
from gateway.config import Settings
from gateway.errors import StartupError
from gateway.ops.http_server import GatewayRunner
from gateway.ops.logs import ACCESS_LOGGER, access_logger_class
from gateway.redaction.redactor import Redactor
from gateway.store.holder import holding

log = logging.getLogger("loopwatch")

GC_THRESHOLDS = (10_000, 10, 10)  # see settle_heap
BACKLOG = 1024


def store_errors() -> tuple[type[BaseException], ...]:
    """What the database drivers raise when a database cannot be opened or reached. psycopg
    is named only once loaded (by a PostgreSQL store): a SQLite gateway never imports it."""
    psycopg = sys.modules.get("psycopg")
    driver = (psycopg.Error,) if psycopg is not None else ()
    return (sa_exc.SQLAlchemyError, sqlite3.Error, *driver)


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address `host` names (as asyncio's create_server would)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {host}:{port}: {_reason(exc)}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            # Listen at once: a client arriving while the store opens waits, never is refused.
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {_reason(exc)}") from None
    return sockets


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return str(exc.strerror or exc).lower()
    if exc.errno and exc.errno > 0 and exc.errno in errno.errorcode:
        return os.strerror(exc.errno).lower()
    return str(exc)


def store_failure(database_url: str, exc: BaseException) -> StartupError:
    """One line: which database (never its password) and the driver's first line of why."""
    url = make_url(database_url).render_as_string(hide_password=True)
    cause = getattr(exc, "orig", None) or exc
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return StartupError(f"cannot open database {url}: {first.removeprefix('connection failed: ')}")


def runner_for(app: web.Application, settings: Settings) -> web.AppRunner:
    if not settings.access_log:
        return GatewayRunner(app, handler_cancellation=True, access_log=None)
    return GatewayRunner(
        app,
        handler_cancellation=True,
        access_log=logging.getLogger(ACCESS_LOGGER),
        access_log_class=access_logger_class(Redactor(settings.redaction).redact_text),
    )


@contextlib.asynccontextmanager
async def running(
    settings: Settings, app: web.Application | None = None
) -> AsyncIterator[list[str]]:
    """The gateway serving on its port while the block runs; yields the URLs it listens on.

    A one-process gateway counts budgets in its memory, so it holds a SQLite store alone
    (until its clean-up has written them): a second gateway on the file refuses to start.
    """
    sockets = bind(settings.host, settings.port)
    try:
        with holding(settings.database_url, alone=settings.workers == 1):
            runner = runner_for(app or create_app(settings), settings)
            try:
                await _start(runner, settings)
                sites = [web.SockSite(runner, sock, backlog=BACKLOG) for sock in sockets]
                for site in sites:
                    await site.start()
                settle_heap()
                yield [site.name for site in sites]
            finally:
                await runner.cleanup()
    finally:
        for sock in sockets:
            sock.close()


async def _start(runner: web.AppRunner, settings: Settings) -> None:
    """The app's start-up: the store, its migrations, the ledger."""
    try:
        await runner.setup()
    except StartupError:
        raise
    except store_errors() as exc:
        raise store_failure(settings.database_url, exc) from exc


def settle_heap() -> None:
    """What start-up built (modules, price tables, the app) lives as long as the process:
    frozen out of the collector's sight, a full collection scans only what requests leave
    behind, not the whole heap (~80 ms of stalled loop each). Requests free what they make
    by reference counting; a young collection every 10,000 net allocations, not 700, finds
    the few cycles as well at a tenth of the cost."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(settings: Settings) -> None:
    async with running(settings) as urls:
        log.info("loopwatch listening on %s (upstream %s)", ", ".join(urls), settings.upstream_url)
        await until_signal()
        log.info("loopwatch stopping")


async def until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run(settings: Settings, loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> int:
    """Serve until SIGINT or SIGTERM; a start-up failure is one line on stderr and exit 2."""
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(serve(settings))
    except StartupError as exc:
        log.debug("start-up failed", exc_info=exc.__cause__)
        print(f"loopwatch: {exc}", flush=True, file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place
        return 130
    return 0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed (Linux, macOS): a cheaper event loop for every request."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
