"""`loopwatch demo`: the gateway on SQLite, a built-in scripted provider and sample agent runs
through it, so a newcomer sees real traces in the UI with no API key and no network.

The demo gateway counts a trace as over after DEMO_IDLE_SECONDS (2 s) quiet, unless
`trace_idle_seconds` is set explicitly, so the run whose agent dies mid-loop shows as
`abandoned` moments after the runs instead of five minutes later. Every other sample run
ends in a status that holds whatever the time (completed, refused, budget_exceeded), so the
short window hides nothing there; only traffic you send yourself shows `running` for just
2 s between its steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

from aiohttp import web
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from gateway.app import DEPS, MCP, create_app
from gateway.config import McpServer, Settings
from gateway.demo import mcp_tools
from gateway.demo.agents import run_all
from gateway.demo.loop import RunSummary
from gateway.demo.provider import ScriptedProvider
from gateway.errors import StartupError
from gateway.ops.http_server import GatewayRunner
from gateway.ops.serving import bind, store_errors, store_failure, until_signal
from gateway.store.holder import held_alone, holding

__all__ = ["DEMO_IDLE_SECONDS", "RunSummary", "run_demo", "serve_demo"]

_WILDCARDS = ("0.0.0.0", "::", "")
DEMO_IDLE_SECONDS = 2.0


def reset_database(database_url: str) -> None:
    """Start each demo from an empty SQLite file, so traces of earlier demos don't pile up."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return
    # Its budget ledger too: counts of the removed traces must not carry over.
    for suffix in ("", "-wal", "-shm", "-ledger", "-ledger-wal", "-ledger-shm"):
        Path(url.database + suffix).unlink(missing_ok=True)
    # Records an earlier demo left in its spool belong to the database just removed.
    shutil.rmtree(url.database + "-spool", ignore_errors=True)


@contextlib.asynccontextmanager
async def _serving(app: web.Application, host: str, port: int) -> AsyncIterator[int]:
    """Serve `app` until the block ends; yields the bound port (useful when `port` is 0)."""
    runner = GatewayRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _gateway(
    app: web.Application, sockets: list[socket.socket], url: str
) -> AsyncIterator[None]:
    """The demo gateway on sockets bound before anything was touched; a store that cannot
    be opened is one line naming it, as for `serve`. It counts budgets in its memory, so it
    holds the store alone, as a one-process `serve` does."""
    runner = GatewayRunner(app, access_log=None, handler_cancellation=True)
    try:
        with holding(url, alone=True):
            try:
                await _started(runner, url)
                for sock in sockets:
                    await web.SockSite(runner, sock).start()
                yield
            finally:
                await runner.cleanup()  # budget counts written before another may hold it
    finally:
        for sock in sockets:
            sock.close()


async def _started(runner: GatewayRunner, url: str) -> None:
    try:
        await runner.setup()
    except StartupError:
        raise
    except store_errors() as exc:
        raise store_failure(url, exc) from exc


def _print_summary(out: TextIO, ui: str, runs: list[RunSummary]) -> None:
    print(f"\nLoopwatch demo: {len(runs)} sample runs recorded.", file=out)
    for number, run in enumerate(runs, 1):
        link = f"{ui}traces/{run.trace_id}" if run.trace_id else "(no trace)"
        steps = f"{run.steps} step{'s' if run.steps != 1 else ''}"
        print(f"  {number}. {run.title:<38} {steps:<8} {run.outcome:<34} {link}", file=out)
        for line in run.log:
            print(f"       ↳ {line}", file=out)
    print(f"\nOpen the trace viewer: {ui}", file=out)


def _idle_seconds(settings: Settings) -> float:
    if "trace_idle_seconds" in settings.model_fields_set:  # the user's own choice stands
        return settings.trace_idle_seconds
    return DEMO_IDLE_SECONDS


async def serve_demo(
    settings: Settings, *, once: bool, out: TextIO = sys.stdout
) -> list[RunSummary]:
    """The demo's core: serve, run the samples, print, then serve until stopped (unless once).

    The port is bound and the store found unheld before the database is emptied: a second
    demo beside a running one stops with one line and deletes nothing.
    """
    sockets = bind(settings.host, settings.port)
    try:
        with held_alone(settings.database_url):
            reset_database(settings.database_url)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    provider = ScriptedProvider()
    async with (
        _serving(provider.app, "127.0.0.1", 0) as provider_port,
        _serving(mcp_tools.make_app(), "127.0.0.1", 0) as docs_port,
    ):
        provider_url = f"http://127.0.0.1:{provider_port}"
        docs = McpServer(name="docs", url=f"http://127.0.0.1:{docs_port}/mcp")
        gateway_settings = settings.model_copy(
            update={
                "upstream_url": f"{provider_url}/v1",
                "anthropic_upstream_url": provider_url,
                # The demo's points need these, whatever the environment or a config file says.
                "routes": (),
                "pairing": "enforce",
                "recorder_flush_seconds": 0.02,
                "loops": "observe",
                "loop_threshold": 3,
                "trace_idle_seconds": _idle_seconds(settings),
                "mcp_servers": (*settings.mcp_servers, docs),
            }
        )
        app = create_app(gateway_settings)
        port = int(sockets[0].getsockname()[1])
        async with _gateway(app, sockets, settings.database_url):
            host = "127.0.0.1" if settings.host in _WILDCARDS else settings.host
            base = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
            runs = await run_all(base)
            await app[DEPS].recorder.flush(timeout=10)
            await app[MCP].flush()
            _print_summary(out, f"{base}/", runs)
            if not once:
                print("Serving until Ctrl-C.", file=out, flush=True)
                await until_signal()
    return runs


def run_demo(settings: Settings, *, once: bool = False) -> int:
    """Entry point of `loopwatch demo`; returns the process exit code. A start-up failure is
    one line on stderr and exit 2, as for `serve`."""
    try:
        asyncio.run(serve_demo(settings, once=once))
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place: still a clean stop
        return 0
    except StartupError as exc:
        print(f"loopwatch: {exc}", file=sys.stderr, flush=True)
        return 2
    except sa_exc.ArgumentError as exc:  # a database URL no driver reads
        print(f"loopwatch: invalid database URL: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0
