"""The budget ledger: per-trace step and token counts, reserved atomically in the database.

One conditional upsert per reservation makes budgets exact under concurrency and across
replicas sharing PostgreSQL: the row lock (or SQLite's write lock) orders racing requests,
and the WHERE clause is re-checked after each wait.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from gateway.checks import budgets
from gateway.checks.budget_rule import (
    RULE,
    UNLIMITED,
    Bound,
    Caps,
    caps_from,
    refusing_budget,
)
from gateway.checks.budgets import Limits, Reservation, Settlement, Spent

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def _nano_column() -> sa.Column[int]:
    return sa.Column(sa.BigInteger, nullable=False, server_default="0")


class BudgetLedgerRow(SQLModel, table=True):
    __tablename__ = "budget_ledger"

    trace_id: str = Field(sa_column=sa.Column(sa.String(128), primary_key=True))
    steps: int = Field(default=0, sa_column=sa.Column(sa.Integer, nullable=False))
    tokens_spent: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    tokens_in_flight: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    last_reserved: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    # Cost budgets in nano-dollars, and the wall clock of the trace's first request (epoch
    # seconds) for time budgets.
    cost_spent: int = Field(default=0, sa_column=_nano_column())
    cost_in_flight: int = Field(default=0, sa_column=_nano_column())
    cost_last_held: int = Field(default=0, sa_column=_nano_column())
    started_at: float | None = Field(default=None, sa_column=sa.Column(sa.Float, nullable=True))


def _held(want: str, cap: str, spent: str, in_flight: str) -> str:
    left = f"{cap} - budget_ledger.{spent} - budget_ledger.{in_flight}"
    return f"CASE WHEN {want} < {left} THEN {want} ELSE {left} END"


# Each of the budget rule's COUNTS as RESERVE reads it from the stored row.
_COUNT_SQL = {
    "steps": "budget_ledger.steps",
    "tokens": "budget_ledger.tokens_spent + budget_ledger.tokens_in_flight",
    "cost": "budget_ledger.cost_spent + budget_ledger.cost_in_flight",
    "elapsed": ":now - coalesce(budget_ledger.started_at, :now)",
}


def _allows(bound: Bound) -> str:
    """A bound of the rule in SQL: caps are parameters named after Caps' fields (UNLIMITED
    for a limit that is not set, so one statement serves every combination of limits)."""
    used = _COUNT_SQL[bound.count] + ("" if bound.floor is None else f" + :{bound.floor}")
    return f"{used} {'<=' if bound.inclusive else '<'} :{bound.cap}"


# The budget rule's WHERE clause (gateway.checks.budget_rule.RULE, rendered here).
ALLOWED = "\n        AND ".join(_allows(bound) for bound in RULE)
_HELD = _held(":want", ":max_tokens", "tokens_spent", "tokens_in_flight")
_COST_HELD = _held(":want_cost", ":max_cost", "cost_spent", "cost_in_flight")
_COLUMNS = """steps, tokens_spent, tokens_in_flight, last_reserved, cost_spent, cost_in_flight,
    cost_last_held, started_at"""
# One statement: a new trace's row is inserted with its first reservation; an existing row
# is updated only while every budget allows (else no row returns and the request is refused).
# Inside DO UPDATE, `budget_ledger.x` is the stored value (SQLite and PostgreSQL alike), and
# every SET expression reads the values from before the update.
RESERVE = f"""
    INSERT INTO budget_ledger (trace_id, {_COLUMNS})
    VALUES (:trace_id, 1, 0, :first_held, :first_held, 0, :first_cost, :first_cost, :now)
    ON CONFLICT (trace_id) DO UPDATE SET
        steps = budget_ledger.steps + 1,
        tokens_in_flight = budget_ledger.tokens_in_flight + {_HELD},
        last_reserved = {_HELD},
        cost_in_flight = budget_ledger.cost_in_flight + {_COST_HELD},
        cost_last_held = {_COST_HELD},
        started_at = coalesce(budget_ledger.started_at, :now)
    WHERE {ALLOWED}
    RETURNING {_COLUMNS}
"""
SPENT = f"""
    SELECT {_COLUMNS} FROM budget_ledger WHERE trace_id = :trace_id
"""
# A failed attempt (no answer from the provider) gives its step back: `steps_back`.
SETTLE = """
    UPDATE budget_ledger SET steps = steps - :steps_back,
        tokens_in_flight = tokens_in_flight - :held,
        tokens_spent = tokens_spent + :used,
        cost_in_flight = cost_in_flight - :cost_held,
        cost_spent = cost_spent + :cost_used
    WHERE trace_id = :trace_id
"""

# Counts admitted while the ledger was unreachable, added when it answers again.
ADD = f"""
    INSERT INTO budget_ledger (trace_id, {_COLUMNS})
    VALUES (:trace_id, :steps, :tokens, 0, 0, :cost, 0, 0, :now)
    ON CONFLICT (trace_id) DO UPDATE SET
        steps = budget_ledger.steps + :steps,
        tokens_spent = budget_ledger.tokens_spent + :tokens,
        cost_spent = budget_ledger.cost_spent + :cost
"""


class Ledger(Protocol):
    """Where budgets are counted: in a thread over SQLAlchemy, or natively async (PostgreSQL)."""

    async def reserve(
        self,
        trace_id: str,
        limits: Limits,
        wanted_tokens: int | None,
        output_price: Decimal | None = None,
    ) -> Reservation | Spent:
        """Take one step and hold completion tokens for it, or say which budget is spent.

        Waits first for this trace's settlement writes under way.
        """
        ...

    def settle_later(self, settlement: Settlement) -> None:
        """Write a settlement in the background; a failure is logged."""
        ...

    async def settle(self, settlement: Settlement) -> None:
        """Write a settlement now; raises when the store does not take it."""
        ...

    async def add(self, trace_id: str, steps: int, tokens: int, cost_nano: int = 0) -> None:
        """Add steps, spent tokens and dollars admitted elsewhere (an outage); raises on failure."""
        ...

    async def close(self) -> None: ...


def reserve_params(
    trace_id: str,
    limits: Limits,
    wanted_tokens: int | None,
    output_price: Decimal | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Parameters of RESERVE: a limit that is not set is UNLIMITED, a hold that is not
    wanted is 0. `output_price` is dollars per output token of the model (cost budgets)."""
    caps = Caps.of(limits, output_price)
    # Without a token budget nothing is held; otherwise hold what the request may produce.
    want = 0 if limits.max_tokens is None else (wanted_tokens or UNLIMITED)
    want_cost = budgets.cost_wanted_nano(limits, wanted_tokens, output_price)
    want_cost = UNLIMITED if want_cost is None else want_cost
    # Each cap under its field's name, as RESERVE's WHERE clause names it (written out: a
    # literal is what the request path can afford).
    return {
        "trace_id": trace_id,
        "max_steps": caps.max_steps,
        "max_tokens": caps.max_tokens,
        "max_cost": caps.max_cost,
        "cost_floor": caps.cost_floor,
        "max_duration": caps.max_duration,
        "want": want,
        "first_held": min(want, caps.max_tokens),
        "want_cost": want_cost,
        "first_cost": min(want_cost, caps.max_cost),
        "now": time.time() if now is None else now,
    }


def caps_of(params: dict[str, Any]) -> Caps:
    """The caps RESERVE's parameters hold, for the Python side of the rule."""
    return caps_from(params)


def add_params(trace_id: str, steps: int, tokens: int, cost_nano: int) -> dict[str, Any]:
    return {
        "trace_id": trace_id,
        "steps": steps,
        "tokens": tokens,
        "cost": cost_nano,
        "now": time.time(),
    }


def settle_params(settlement: Settlement) -> dict[str, Any]:
    reservation = settlement.reservation
    return {
        "trace_id": reservation.trace_id,
        "held": reservation.tokens,
        "used": settlement.used_tokens,
        "cost_held": reservation.cost_held_nano,
        "cost_used": settlement.used_cost_nano,
        "steps_back": settlement.steps_back,
    }


def outcome(
    trace_id: str,
    limits: Limits,
    reserved: tuple[Any, ...] | None,
    spent: tuple[Any, ...] | None,
    params: dict[str, Any],
    output_price: Decimal | None = None,
) -> Reservation | Spent:
    """The reservation from its RETURNING row, or (no row) which budget refused it."""
    if reserved is None:
        return _spent(limits, spent, params)
    steps, used, in_flight, held, cost_spent, cost_in_flight, cost_held, started = reserved
    tokens_left = None if limits.max_tokens is None else limits.max_tokens - used - in_flight
    cap = limits.max_cost_nano
    cost_left = None if cap is None else cap - cost_spent - cost_in_flight
    clamp = budgets.tightest(
        None if limits.max_tokens is None else held,
        None if cap is None else budgets.cost_clamp(cost_held, output_price),
    )
    return Reservation(
        trace_id,
        held,
        steps,
        tokens_left,
        clamp,
        cost_held_nano=cost_held if cap is not None else 0,
        cost_left_nano=cost_left,
        trace_started_at=started,
    )


def _spent(limits: Limits, row: tuple[Any, ...] | None, params: dict[str, Any]) -> Spent:
    """Which budget refused, in the order RESERVE checks them."""
    steps, used, in_flight, _, cost_spent, cost_in_flight, _, started = row or (0,) * 7 + (None,)
    tokens, cost = used + in_flight, cost_spent + cost_in_flight
    elapsed = 0.0 if started is None else params["now"] - started
    # No row came back, so the rule refused: when every count now allows (another
    # request settled meanwhile), only the clock can have.
    budget = refusing_budget(caps_of(params), steps, tokens, cost, elapsed) or "time"
    return Spent(budget, steps, tokens, cost_used_nano=cost, elapsed_s=elapsed)


class ThreadLedger:
    """The ledger through a SQLAlchemy engine, each call in a thread of its own pool (SQLite):
    a reservation never queues behind the gateway's other work in the default pool."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writing = SettlementWrites()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="loopwatch-ledger")

    async def _in_pool(self, function: Callable[[T], R], argument: T) -> R:
        return await asyncio.get_running_loop().run_in_executor(self._pool, function, argument)

    async def reserve(
        self,
        trace_id: str,
        limits: Limits,
        wanted_tokens: int | None,
        output_price: Decimal | None = None,
    ) -> Reservation | Spent:
        params = reserve_params(trace_id, limits, wanted_tokens, output_price)
        await self._writing.wait_for(trace_id)
        rows = await self._in_pool(self._reserve, params)
        return outcome(trace_id, limits, *rows, params, output_price)

    def _reserve(
        self, params: dict[str, Any]
    ) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]:
        with _statements(self._engine) as execute:
            row = execute(RESERVE, params)
            spent = execute(SPENT, params) if row is None else None
        return row, spent

    def settle_later(self, settlement: Settlement) -> None:
        future = asyncio.get_running_loop().run_in_executor(self._pool, self._settle, settlement)
        self._writing.add(settlement.reservation.trace_id, future)

    def _settle(self, settlement: Settlement) -> None:
        with _statements(self._engine) as execute:
            execute(SETTLE, settle_params(settlement))

    async def settle(self, settlement: Settlement) -> None:
        await self._in_pool(self._settle, settlement)

    async def add(self, trace_id: str, steps: int, tokens: int, cost_nano: int = 0) -> None:
        params = add_params(trace_id, steps, tokens, cost_nano)
        await self._in_pool(self._add, params)

    def _add(self, params: dict[str, Any]) -> None:
        with _statements(self._engine) as execute:
            execute(ADD, params)

    async def close(self) -> None:
        await self._writing.drain()
        self._pool.shutdown(wait=False)
        self._engine.dispose()


class SettlementWrites:
    """Settlement writes under way, by trace.

    A trace's next reservation waits for them: otherwise it could read a finished step's
    tokens as still in flight (and be clamped or refused for nothing).
    """

    def __init__(self) -> None:
        self._by_trace: dict[str, set[asyncio.Future[None]]] = {}

    def add(self, trace_id: str, write: asyncio.Future[None]) -> None:
        self._by_trace.setdefault(trace_id, set()).add(write)
        write.add_done_callback(lambda done: self._finished(trace_id, done))

    async def wait_for(self, trace_id: str) -> None:
        writes = self._by_trace.get(trace_id)
        if writes:
            await asyncio.wait(list(writes))  # failures are logged by _finished, not raised

    async def drain(self) -> None:
        writes = [w for group in self._by_trace.values() for w in group]
        if writes:
            await asyncio.wait(writes, timeout=5)

    def _finished(self, trace_id: str, write: asyncio.Future[None]) -> None:
        group = self._by_trace.get(trace_id, set())
        group.discard(write)
        if not group:
            self._by_trace.pop(trace_id, None)
        if not write.cancelled() and write.exception() is not None:
            log.warning("budget ledger settlement failed: %r", write.exception())


Execute = Callable[[str, dict[str, Any]], "tuple[Any, ...] | None"]


@contextmanager
def _statements(engine: Engine) -> Iterator[Execute]:
    """Run single statements on a pooled driver connection, each atomic by itself.

    The ledger sits on the request path, so it skips SQLAlchemy's statement layer (a few
    hundred microseconds a call) and transaction round trips: an autocommitted upsert is
    atomic, and SQLite's busy timeout and PostgreSQL's row lock order racing requests.
    """
    connection = engine.raw_connection()
    postgres = engine.dialect.name == "postgresql"
    try:
        cursor = connection.cursor()

        def execute(sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
            cursor.execute(pyformat(sql) if postgres else sql, params)
            row = cursor.fetchone() if cursor.description else None
            return None if row is None else tuple(row)

        yield execute
        connection.commit()  # a no-op under autocommit
    except BaseException:
        connection.rollback()
        raise
    finally:
        connection.close()  # back to the pool


def pyformat(sql: str) -> str:
    """psycopg takes %(name)s where SQLite takes :name."""
    return _NAMED.sub(r"%(\1)s", sql)


_NAMED = re.compile(r":(\w+)")
