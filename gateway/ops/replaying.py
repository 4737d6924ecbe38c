"""`loopwatch replay` as a process: its server bound, listening until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import sys

from aiohttp import web

from gateway.config import Settings
from gateway.errors import StartupError
from gateway.ops.serving import bind, until_signal
from gateway.replay.server import create_app
from gateway.replay.tape import Step

log = logging.getLogger("loopwatch")


def run(settings: Settings, trace_id: str, steps: list[Step], *, live: bool) -> int:
    """Serve until a signal; a port that cannot be bound is one line on stderr and exit 2."""
    try:
        with asyncio.Runner() as runner:
            runner.run(_serve(settings, trace_id, steps, live=live))
    except StartupError as exc:
        print(f"loopwatch: {exc}", flush=True, file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place
        return 130
    return 0


async def _serve(settings: Settings, trace_id: str, steps: list[Step], *, live: bool) -> None:
    sockets = bind(settings.host, settings.port)
    runner = web.AppRunner(create_app(steps, settings, live=live), handler_cancellation=True)
    try:
        await runner.setup()
        sites = [web.SockSite(runner, sock) for sock in sockets]
        for site in sites:
            await site.start()
        urls = ", ".join(site.name for site in sites)
        after = "forwarding to the upstream" if live else "409"
        log.info(
            "loopwatch replay listening on %s (trace %s, %d steps; on divergence: %s)",
            urls,
            trace_id,
            len(steps),
            after,
        )
        await until_signal()
    finally:
        await runner.cleanup()
        for sock in sockets:
            sock.close()
