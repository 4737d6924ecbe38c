"""The background responses whose step is open, shared by every gateway on the store: a row
a response, written when its creation ends before the response does, taken (deleted and
returned in one statement) by the one exchange that ends its step, whichever gateway runs it.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from gateway.store.models import ID_LENGTH, UTCDateTime

OPEN_RESPONSES = sa.Table(
    "open_responses",
    SQLModel.metadata,
    sa.Column("response_id", sa.String(256), primary_key=True),
    sa.Column("trace_id", sa.String(ID_LENGTH), nullable=False),
    sa.Column("step_id", sa.String(ID_LENGTH), nullable=False),
    sa.Column("opened_at", UTCDateTime(), nullable=False),
    # The step as its creation saw it, in the form the proxy wrote it (opaque here).
    sa.Column("step", sa.Text, nullable=False),
)


def _writing(engine: Engine) -> Connection:
    # As gateway.store.engine.write_connection (SQLite BEGIN IMMEDIATE), which this module,
    # registered by the migrations that module runs, cannot import.
    return engine.connect().execution_options(write=True)


def put(
    engine: Engine, response_id: str, trace_id: str, step_id: str, at: datetime, step: str
) -> None:
    """Open the step of `response_id` (a response id seen again replaces its row)."""
    row = {
        "response_id": response_id,
        "trace_id": trace_id,
        "step_id": step_id,
        "opened_at": at,
        "step": step,
    }
    with _writing(engine) as conn, conn.begin():
        conn.execute(OPEN_RESPONSES.delete().where(OPEN_RESPONSES.c.response_id == response_id))
        conn.execute(OPEN_RESPONSES.insert().values(row))


def find(engine: Engine, response_id: str) -> str | None:
    """The open step of `response_id`, left open."""
    query = sa.select(OPEN_RESPONSES.c.step).where(OPEN_RESPONSES.c.response_id == response_id)
    with engine.connect() as conn:
        found: str | None = conn.scalar(query)
    return found


def take(engine: Engine, response_id: str) -> str | None:
    """The open step of `response_id`, no longer open: of gateways racing to end it, one
    gets it (the row is deleted and returned by one statement), the others None."""
    statement = (
        OPEN_RESPONSES.delete()
        .where(OPEN_RESPONSES.c.response_id == response_id)
        .returning(OPEN_RESPONSES.c.step)
    )
    with _writing(engine) as conn, conn.begin():
        taken: str | None = conn.scalar(statement)
    return taken


def forget_older(conn: Connection, cutoff: datetime) -> int:
    """Retention: the open steps of responses opened before `cutoff` and never ended (the
    provider keeps a response for polling far less long) go unrecorded."""
    old = OPEN_RESPONSES.delete().where(OPEN_RESPONSES.c.opened_at < cutoff)
    return conn.execute(old).rowcount or 0
