"""The budget ledger's own SQLite file beside the store, so a reservation never waits behind
the recorder's write transactions."""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.engine import make_engine
from gateway.store.ledger.core import BudgetLedgerRow


def separate_sqlite_ledger(database_url: str, engine: Engine) -> Engine | None:
    """For a SQLite file, the ledger's own database file beside it (`<file>-ledger`), so a
    reservation never waits behind the recorder's write transactions on the store. Rows a
    ledger kept in the store (an earlier version) are carried over when the file is new."""
    match = re.match(r"^sqlite(\+\w+)?:///(?P<file>.+)$", database_url)
    if engine.dialect.name != "sqlite" or not match or match["file"] == ":memory:":
        return None
    path = match["file"] + "-ledger"
    new = not Path(path).exists()
    ledger = make_engine(f"sqlite:///{path}")
    table: sa.Table = BudgetLedgerRow.__table__  # type: ignore[attr-defined]
    with ledger.begin() as conn:
        table.create(conn, checkfirst=True)
    if new:
        with engine.connect() as source:
            rows = [dict(row._mapping) for row in source.execute(table.select())]
        if rows:
            with ledger.begin() as conn:
                conn.execute(table.insert(), rows)
    return ledger
