"""GET /readyz: ready only when the store answers and the recorder is within its bound.

The store check is one cheap query in a worker thread, bounded by a timeout; concurrent
probes share the check under way, so a hung database never piles up threads.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import sqlalchemy as sa
from aiohttp import web
from sqlalchemy.engine import Engine

STORE_TIMEOUT = 2.0  # seconds; a load balancer's probe usually gives up after a few


def _schema_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


class QueueDepth(Protocol):
    @property
    def queue_depth(self) -> int: ...


class Readiness:
    def __init__(
        self, engine: Engine, recorder: QueueDepth, queue_size: int, timeout: float = STORE_TIMEOUT
    ) -> None:
        self._engine = engine
        self._recorder = recorder
        self._queue_size = queue_size
        self._timeout = timeout
        self._probe: asyncio.Future[str | None] | None = None

    async def store(self) -> dict[str, Any]:
        if self._probe is None or self._probe.done():
            loop = asyncio.get_running_loop()  # a future of the default pool, shared by probes
            self._probe = loop.run_in_executor(None, _schema_revision, self._engine)
        try:
            revision = await asyncio.wait_for(asyncio.shield(self._probe), self._timeout)
        except TimeoutError:
            return {"ok": False, "error": f"no answer within {self._timeout:g}s"}
        except Exception as exc:
            return {"ok": False, "error": _first_line(exc)}
        return {"ok": True, "schema_revision": revision}

    def recorder(self) -> dict[str, Any]:
        depth = self._recorder.queue_depth
        return {
            "ok": depth < self._queue_size,
            "queue_depth": depth,
            "queue_size": self._queue_size,
        }

    async def response(self) -> web.Response:
        checks = {"store": await self.store(), "recorder": self.recorder()}
        failing = [name for name, check in checks.items() if not check["ok"]]
        body = {"status": "not_ready" if failing else "ready", "failing": failing, "checks": checks}
        return web.json_response(body, status=503 if failing else 200)


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}".rstrip(": ")
