"""The budget ledger: per-trace step and token counts, reserved atomically in the database.

One conditional UPDATE per reservation makes budgets exact under concurrency and across
replicas sharing PostgreSQL: the row lock (or SQLite's write lock) orders racing requests,
and the WHERE clause is re-checked after each wait.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from gateway.budgets import Limits, Reservation, Settlement, Spent

# Stands for "no limit" inside SQL, so one statement serves every combination of limits.
UNLIMITED = 2**62


class BudgetLedgerRow(SQLModel, table=True):
    __tablename__ = "budget_ledger"

    trace_id: str = Field(sa_column=sa.Column(sa.String(128), primary_key=True))
    steps: int = Field(default=0, sa_column=sa.Column(sa.Integer, nullable=False))
    tokens_spent: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    tokens_in_flight: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    last_reserved: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))


LEDGER = BudgetLedgerRow.__table__  # type: ignore[attr-defined]

# One statement: a new trace's row is inserted with its first reservation; an existing row
# is updated only while both budgets allow (else no row returns and the request is refused).
# Inside DO UPDATE, `budget_ledger.x` is the stored value (SQLite and PostgreSQL alike).
_HELD = """CASE WHEN :want < :max_tokens - budget_ledger.tokens_spent
    - budget_ledger.tokens_in_flight THEN :want ELSE :max_tokens - budget_ledger.tokens_spent
    - budget_ledger.tokens_in_flight END"""
_RESERVE = f"""
    INSERT INTO budget_ledger (trace_id, steps, tokens_spent, tokens_in_flight, last_reserved)
    VALUES (:trace_id, 1, 0, :first_held, :first_held)
    ON CONFLICT (trace_id) DO UPDATE SET
        steps = budget_ledger.steps + 1,
        tokens_in_flight = budget_ledger.tokens_in_flight + {_HELD},
        last_reserved = {_HELD}
    WHERE budget_ledger.steps < :max_steps
        AND budget_ledger.tokens_spent + budget_ledger.tokens_in_flight < :max_tokens
    RETURNING steps, tokens_spent, tokens_in_flight, last_reserved
"""
_SPENT = """
    SELECT steps, tokens_spent, tokens_in_flight FROM budget_ledger WHERE trace_id = :trace_id
"""
_SETTLE = """
    UPDATE budget_ledger SET tokens_in_flight = tokens_in_flight - :held,
        tokens_spent = tokens_spent + :used
    WHERE trace_id = :trace_id
"""


def reserve(
    engine: Engine,
    trace_id: str,
    limits: Limits,
    wanted_tokens: int | None,
    settle_first: list[Settlement] | None = None,
) -> Reservation | Spent:
    """Take one step and hold completion tokens for it, or say which budget is spent.

    `settle_first`: finished steps of the trace whose settlement is still pending.
    """
    max_steps = limits.max_steps or UNLIMITED
    max_tokens = limits.max_tokens or UNLIMITED
    # Without a token budget nothing is held; otherwise hold what the request may produce.
    want = 0 if limits.max_tokens is None else (wanted_tokens or UNLIMITED)
    params = {
        "trace_id": trace_id,
        "max_steps": max_steps,
        "max_tokens": max_tokens,
        "want": want,
        "first_held": min(want, max_tokens),
    }
    with _statements(engine) as execute:
        for settlement in settle_first or ():
            execute(_SETTLE, _settle_params(settlement))
        row = execute(_RESERVE, params)
        if row is None:
            return _spent(execute(_SPENT, params), max_steps)
    steps, spent, in_flight, reserved = row
    tokens_left = None if limits.max_tokens is None else limits.max_tokens - spent - in_flight
    clamp = None if limits.max_tokens is None else reserved
    return Reservation(trace_id, reserved, steps, tokens_left, clamp)


def settle(engine: Engine, settlements: list[Settlement]) -> None:
    """Replace the tokens held in flight by the tokens the steps really used."""
    with _statements(engine) as execute:
        for settlement in settlements:
            execute(_SETTLE, _settle_params(settlement))


def _settle_params(settlement: Settlement) -> dict[str, Any]:
    reservation = settlement.reservation
    return {
        "trace_id": reservation.trace_id,
        "held": reservation.tokens,
        "used": settlement.used_tokens,
    }


def _spent(row: tuple[Any, ...] | None, max_steps: int) -> Spent:
    steps, spent, in_flight = row or (0, 0, 0)
    budget = "steps" if steps >= max_steps else "tokens"
    return Spent(budget, steps, spent + in_flight)


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
            cursor.execute(_PYFORMAT.sub(r"%(\1)s", sql) if postgres else sql, params)
            row = cursor.fetchone() if cursor.description else None
            return None if row is None else tuple(row)

        yield execute
        connection.commit()  # a no-op under autocommit
    except BaseException:
        connection.rollback()
        raise
    finally:
        connection.close()  # back to the pool


# psycopg takes %(name)s where SQLite takes :name.
_PYFORMAT = re.compile(r":(\w+)")
