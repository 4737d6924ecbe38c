"""The budget ledger of a sole-writer SQLite gateway (one process writes the file): counts
live in this process, so a reservation is decided at once, exactly, and never waits behind
the recorder's writes; they are written behind to the ledger's own database file, and read
back from it for a trace not in memory (a restart, or one evicted as least recently used).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.checks.budget_rule import refusing_budget
from gateway.checks.budgets import Limits, Reservation, Settlement, Spent
from gateway.store.ledger.core import (
    SPENT,
    _statements,
    add_params,
    caps_of,
    outcome,
    reserve_params,
    settle_params,
)

log = logging.getLogger(__name__)

COLUMNS = (
    "steps",
    "tokens_spent",
    "tokens_in_flight",
    "last_reserved",
    "cost_spent",
    "cost_in_flight",
    "cost_last_held",
    "started_at",
)
UPSERT = f"""
    INSERT INTO budget_ledger (trace_id, {", ".join(COLUMNS)})
    VALUES (:trace_id, {", ".join(":" + c for c in COLUMNS)})
    ON CONFLICT (trace_id) DO UPDATE SET {", ".join(f"{c} = excluded.{c}" for c in COLUMNS)}
"""
KEPT = 50_000  # traces kept in memory; older ones (written already) are read back on need
WRITE_DELAY = 0.1  # seconds: changes of many reservations go in one transaction
Row = list[Any]  # in the order of COLUMNS


class MemoryLedger:
    """Same interface as ThreadLedger; the RESERVE statement's rules, applied in memory."""

    def __init__(self, engine: Engine, owner: Background) -> None:
        self._owner = owner
        self._engine = engine
        self._rows: OrderedDict[str, Row | None] = OrderedDict()  # None: not in the file
        self._dirty: set[str] = set()
        self._changed = asyncio.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopwatch-ledger")
        self._writer: asyncio.Task[None] | None = None

    async def _row(self, trace_id: str) -> Row | None:
        if trace_id not in self._rows:
            loop = asyncio.get_running_loop()
            found = await loop.run_in_executor(self._pool, self._read, trace_id)
            if trace_id not in self._rows:  # no other reservation loaded it meanwhile
                self._rows[trace_id] = None if found is None else list(found)
        self._rows.move_to_end(trace_id)
        return self._rows[trace_id]

    def _read(self, trace_id: str) -> tuple[Any, ...] | None:
        with _statements(self._engine) as execute:
            return execute(SPENT, {"trace_id": trace_id})

    async def reserve(
        self,
        trace_id: str,
        limits: Limits,
        wanted_tokens: int | None,
        output_price: Decimal | None = None,
    ) -> Reservation | Spent:
        p = reserve_params(trace_id, limits, wanted_tokens, output_price)
        row = await self._row(trace_id)
        if row is None:
            first = [1, 0, p["first_held"], p["first_held"], 0, p["first_cost"], p["first_cost"]]
            row = self._rows[trace_id] = [*first, p["now"]]
            self._touch(trace_id)
            return outcome(trace_id, limits, tuple(row), None, p, output_price)
        steps, spent, in_flight, _, cost_spent, cost_in_flight, _, started = row
        started = p["now"] if started is None else started
        counts = (steps, spent + in_flight, cost_spent + cost_in_flight, p["now"] - started)
        if refusing_budget(caps_of(p), *counts) is not None:
            return outcome(trace_id, limits, None, tuple(row), p, output_price)
        held = min(p["want"], p["max_tokens"] - spent - in_flight)
        cost_held = min(p["want_cost"], p["max_cost"] - cost_spent - cost_in_flight)
        row[:] = [steps + 1, spent, in_flight + held, held]
        row += [cost_spent, cost_in_flight + cost_held, cost_held, started]
        self._touch(trace_id)
        return outcome(trace_id, limits, tuple(row), None, p, output_price)

    def settle_later(self, settlement: Settlement) -> None:
        params = settle_params(settlement)
        row = self._rows.get(params["trace_id"])
        if row is None:  # reserved in memory, so present unless never reserved here
            return
        row[0] -= params["steps_back"]  # a failed attempt gives its step back
        row[1] += params["used"]
        row[2] -= params["held"]
        row[4] += params["cost_used"]
        row[5] -= params["cost_held"]
        self._touch(params["trace_id"])

    async def settle(self, settlement: Settlement) -> None:
        self.settle_later(settlement)

    async def add(self, trace_id: str, steps: int, tokens: int, cost_nano: int = 0) -> None:
        params = add_params(trace_id, steps, tokens, cost_nano)
        row = await self._row(trace_id)
        if row is None:
            self._rows[trace_id] = [steps, tokens, 0, 0, cost_nano, 0, 0, params["now"]]
        else:
            row[0] += steps
            row[1] += tokens
            row[4] += cost_nano
        self._touch(trace_id)

    def _touch(self, trace_id: str) -> None:
        self._dirty.add(trace_id)
        self._changed.set()
        if self._writer is None:
            self._writer = self._owner.task("budget-write-behind", self._write_behind())

    async def _write_behind(self) -> None:
        """Waits for a change (no timer while idle), then writes what changed."""
        while True:
            await self._changed.wait()
            await asyncio.sleep(WRITE_DELAY)
            self._changed.clear()
            await self._write()

    async def _write(self) -> None:
        dirty, self._dirty = self._dirty, set()
        rows = [
            {"trace_id": t, **dict(zip(COLUMNS, row, strict=True))}
            for t in dirty
            if (row := self._rows.get(t)) is not None
        ]
        try:
            if rows:
                await asyncio.get_running_loop().run_in_executor(self._pool, self._upsert, rows)
        except Exception as exc:
            log.warning("budget ledger: writing counts failed, retrying: %r", exc)
            self._dirty |= dirty
            self._changed.set()
            await asyncio.sleep(1.0)
            return
        self._evict()

    def _upsert(self, rows: list[dict[str, Any]]) -> None:
        with _statements(self._engine) as execute:
            execute("BEGIN IMMEDIATE", {})
            for row in rows:
                execute(UPSERT, row)
            execute("COMMIT", {})

    def _evict(self) -> None:
        while len(self._rows) > KEPT:
            trace_id = next(iter(self._rows))
            if trace_id in self._dirty:
                break  # written at the next round
            del self._rows[trace_id]

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        if self._dirty:
            await self._write()
        self._pool.shutdown(wait=True)
        self._engine.dispose()
