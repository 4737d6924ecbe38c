"""An aiohttp app served on a free loopback port, with a count of the requests it is still
answering (a step is handed to the recorder before its handler returns)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.ops.http_server import GatewayRunner

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HOST = "127.0.0.1"


class Served:
    def __init__(self, app: web.Application, *, gateway: bool) -> None:
        """`gateway`: served as `loopwatch serve` serves it (bodies as the client sent them)."""
        self.app = app
        self.in_flight = 0
        app.middlewares.append(self._counting)
        runner = GatewayRunner if gateway else web.AppRunner
        self._runner = runner(app, access_log=None, handler_cancellation=True)
        self.url = ""  # http://127.0.0.1:PORT once started

    @web.middleware
    async def _counting(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.in_flight += 1
        try:
            return await handler(request)
        finally:
            self.in_flight -= 1

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, 0)
        await site.start()
        self.url = f"http://{HOST}:{self._runner.addresses[0][1]}"

    async def idle(self, timeout: float) -> None:
        """Wait until no request is being answered."""
        async with asyncio.timeout(timeout):
            while self.in_flight:
                await asyncio.sleep(0.005)

    async def stop(self) -> None:
        await self._runner.cleanup()
