"""The budget ledger: per-trace step and token counts, reserved atomically in the database.

One conditional UPDATE per reservation makes budgets exact under concurrency and across
replicas sharing PostgreSQL: the row lock (or SQLite's write lock) orders racing requests,
and the WHERE clause is re-checked after each wait.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel

from gateway.budgets import Limits, Reservation, Spent
from gateway.store.engine import dialect_insert, write_connection

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

_RESERVE = sa.text(
    """
    UPDATE budget_ledger SET
        steps = steps + 1,
        tokens_in_flight = tokens_in_flight + CASE WHEN :want < :max_tokens - tokens_spent
            - tokens_in_flight THEN :want ELSE :max_tokens - tokens_spent - tokens_in_flight END,
        last_reserved = CASE WHEN :want < :max_tokens - tokens_spent - tokens_in_flight
            THEN :want ELSE :max_tokens - tokens_spent - tokens_in_flight END
    WHERE trace_id = :trace_id AND steps < :max_steps
        AND tokens_spent + tokens_in_flight < :max_tokens
    RETURNING steps, tokens_spent, tokens_in_flight, last_reserved
    """
)


def reserve(
    engine: Engine, trace_id: str, limits: Limits, wanted_tokens: int | None
) -> Reservation | Spent:
    """Take one step and hold completion tokens for it, or say which budget is spent."""
    max_steps = limits.max_steps or UNLIMITED
    max_tokens = limits.max_tokens or UNLIMITED
    # Without a token budget nothing is held; otherwise hold what the request may produce.
    want = 0 if limits.max_tokens is None else (wanted_tokens or UNLIMITED)
    with write_connection(engine) as conn, conn.begin():
        _ensure_row(conn, trace_id)
        row = conn.execute(
            _RESERVE,
            {"trace_id": trace_id, "max_steps": max_steps, "max_tokens": max_tokens, "want": want},
        ).one_or_none()
        if row is None:
            return _spent(conn, trace_id, max_steps)
    steps, spent, in_flight, reserved = row
    tokens_left = None if limits.max_tokens is None else limits.max_tokens - spent - in_flight
    clamp = None if limits.max_tokens is None else reserved
    return Reservation(trace_id, reserved, steps, tokens_left, clamp)


def settle(engine: Engine, reservation: Reservation, used_tokens: int) -> None:
    """Replace the tokens held in flight by the tokens the step really used."""
    with write_connection(engine) as conn, conn.begin():
        conn.execute(
            sa.update(LEDGER)
            .where(LEDGER.c.trace_id == reservation.trace_id)
            .values(
                tokens_in_flight=LEDGER.c.tokens_in_flight - reservation.tokens,
                tokens_spent=LEDGER.c.tokens_spent + used_tokens,
            )
        )


def _ensure_row(conn: Connection, trace_id: str) -> None:
    insert = dialect_insert(conn, LEDGER).values(
        trace_id=trace_id, steps=0, tokens_spent=0, tokens_in_flight=0, last_reserved=0
    )
    conn.execute(insert.on_conflict_do_nothing(index_elements=["trace_id"]))


def _spent(conn: Connection, trace_id: str, max_steps: int) -> Spent:
    steps, spent, in_flight = conn.execute(
        sa.select(LEDGER.c.steps, LEDGER.c.tokens_spent, LEDGER.c.tokens_in_flight).where(
            LEDGER.c.trace_id == trace_id
        )
    ).one()
    budget = "steps" if steps >= max_steps else "tokens"
    return Spent(budget, steps, spent + in_flight)
