"""The keeper of PostgreSQL's time partitions: at start-up and every hour after, makes the
partitions of the coming periods (gateway.store.partitions.ranges), so rows seldom fall into the
DEFAULT partition. A no-op on an unpartitioned store (SQLite, or PostgreSQL not converted)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.store.partitions import ranges as partitions

log = logging.getLogger(__name__)

EVERY_SECONDS = 3600.0


class PartitionKeeper:
    """start() with the app, close() before the engine is disposed."""

    def __init__(
        self,
        engine: Engine,
        retention_days: int | None,
        *,
        clock: Callable[[], datetime],
        every: float = EVERY_SECONDS,
    ) -> None:
        self._engine = engine
        self._days = partitions.period_days(retention_days)
        self._clock = clock
        self._every = every
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def keep(self) -> list[partitions.Partition]:
        """One round, in the caller's thread: the partitions made."""
        return partitions.ensure_ahead(self._engine, self._clock(), self._days)

    def start(self, owner: Background) -> None:
        if partitions.partitioned(self._engine):
            self._task = owner.task("partitions", self._run(), stop=self._stop.set)

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._every)
            if self._stop.is_set():
                return
            try:
                await asyncio.to_thread(self.keep)
            except Exception as exc:  # the database may be away; the next round tries again
                log.warning("making time partitions failed: %s", exc)
