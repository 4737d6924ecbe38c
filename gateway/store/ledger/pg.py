"""The budget ledger on PostgreSQL through psycopg's own async pool: no thread per request.

Connections autocommit (each reservation is one atomic statement: one round trip) and
commit without waiting for the WAL to reach disk: still atomic and isolated, and a crash of
the database server may forget a few milliseconds of reservations, never records.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from gateway.background import Background
from gateway.checks.budgets import Limits, Reservation, Settlement, Spent
from gateway.store.ledger.core import (
    ADD,
    RESERVE,
    SETTLE,
    SPENT,
    SettlementWrites,
    add_params,
    outcome,
    pyformat,
    reserve_params,
    settle_params,
)

log = logging.getLogger(__name__)

_RESERVE, _SETTLE, _SPENT, _ADD = map(pyformat, (RESERVE, SETTLE, SPENT, ADD))


async def _configure(connection: psycopg.AsyncConnection[Any]) -> None:
    await connection.execute("SET synchronous_commit TO off")


class PostgresLedger:
    def __init__(self, database_url: str, owner: Background) -> None:
        self._owner = owner
        conninfo = "postgresql://" + database_url.split("://", 1)[1]  # no SQLAlchemy driver
        self._pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=20,
            kwargs={"autocommit": True},
            configure=_configure,
            open=False,
        )
        self._writing = SettlementWrites()

    async def open(self) -> None:
        await self._pool.open()

    async def reserve(
        self,
        trace_id: str,
        limits: Limits,
        wanted_tokens: int | None,
        output_price: Decimal | None = None,
    ) -> Reservation | Spent:
        params = reserve_params(trace_id, limits, wanted_tokens, output_price)
        await self._writing.wait_for(trace_id)
        async with self._pool.connection() as connection:
            row = await (await connection.execute(_RESERVE, params)).fetchone()
            spent = None
            if row is None:
                spent = await (await connection.execute(_SPENT, params)).fetchone()
        return outcome(trace_id, limits, row, spent, params, output_price)

    def settle_later(self, settlement: Settlement) -> None:
        task = self._owner.task(
            "budget-settle", self._settle(settlement), finish=True, awaited=True
        )
        self._writing.add(settlement.reservation.trace_id, task)

    async def _settle(self, settlement: Settlement) -> None:
        async with self._pool.connection() as connection:
            await connection.execute(_SETTLE, settle_params(settlement))

    async def settle(self, settlement: Settlement) -> None:
        await self._settle(settlement)

    async def add(self, trace_id: str, steps: int, tokens: int, cost_nano: int = 0) -> None:
        params = add_params(trace_id, steps, tokens, cost_nano)
        async with self._pool.connection() as connection:
            await connection.execute(_ADD, params)

    async def close(self) -> None:
        await self._writing.drain()
        await self._pool.close()
