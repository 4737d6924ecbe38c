"""`loopwatch replay` as a process: the gateway, recording into its store as `serve` does,
in front of the cassette's player (served in-process on a loopback port of its own as the
gateway's upstream); every step it records names the trace it replays."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from gateway.app import STEP_MARKS
from gateway.app import create_app as create_gateway
from gateway.config import Settings
from gateway.errors import ConfigError, StartupError
from gateway.ops.serving import bind, running, until_signal
from gateway.replay.marking import ReplayMarks
from gateway.replay.server import PLAYER
from gateway.replay.server import create_app as create_player
from gateway.replay.tape import Step
from gateway.step import StepRecord

log = logging.getLogger("loopwatch")


def run(settings: Settings, trace_id: str, steps: list[Step], *, live: bool) -> int:
    """Serve until a signal; a port or store that cannot be opened is one line on stderr
    and exit 2."""
    try:
        with asyncio.Runner() as runner:
            runner.run(_serve(settings, trace_id, steps, live=live))
    except (StartupError, ConfigError) as exc:  # ConfigError: a spool directory in use, say
        print(f"loopwatch: {exc}", flush=True, file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place
        return 130
    return 0


async def _serve(settings: Settings, trace_id: str, steps: list[Step], *, live: bool) -> None:
    async with serving(settings, trace_id, steps, live=live) as url:
        after = "forwarding to the upstream" if live else "409"
        log.info(
            "loopwatch replay listening on %s (trace %s, %d steps; on divergence: %s)",
            url,
            trace_id,
            len(steps),
            after,
        )
        await until_signal()


@contextlib.asynccontextmanager
async def serving(
    settings: Settings, trace_id: str, steps: list[Step], *, live: bool
) -> AsyncIterator[str]:
    """The whole replay on `settings.host`/`port` while the block runs: the gateway with its
    store, and the player as its upstream. Yields the gateway's base URL (without /v1)."""
    player = create_player(steps, settings, live=live)
    async with _player_serving(player) as player_url:
        own = upstream_of(settings, player_url)
        gateway = create_gateway(own)
        marks: Callable[[StepRecord], StepRecord] = ReplayMarks(trace_id, player[PLAYER])
        gateway[STEP_MARKS] = marks
        async with running(own, gateway) as urls:
            yield urls[0]


def upstream_of(settings: Settings, player_url: str) -> Settings:
    """The gateway's settings: every protocol's upstream is the player (which alone goes on
    to `settings`' upstream, in a live replay), in this one process."""
    update = {"upstream_url": f"{player_url}/v1", "anthropic_upstream_url": player_url}
    return settings.model_copy(update=update | {"routes": (), "workers": 1})


@contextlib.asynccontextmanager
async def _player_serving(player: web.Application) -> AsyncIterator[str]:
    sockets = bind("127.0.0.1", 0)
    runner = web.AppRunner(player, handler_cancellation=True, access_log=None)
    try:
        await runner.setup()
        for sock in sockets:
            await web.SockSite(runner, sock).start()
        yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
    finally:
        await runner.cleanup()
        for sock in sockets:
            sock.close()
