"""Alembic environment: runs revisions on the connection start-up hands over, or, from the
`alembic` command line, on LOOPWATCH_DATABASE_URL (`-x database_url=...` overrides it)."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from gateway.store.migrate import METADATA, include_object, render_item


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=METADATA,
        # SQLite alters a table by copying it; batch mode writes revisions that way.
        render_as_batch=connection.dialect.name == "sqlite",
        render_item=render_item,
        include_object=include_object,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _command_line() -> None:
    from gateway.config_load import load_settings
    from gateway.store.engine import make_engine

    url = context.get_x_argument(as_dictionary=True).get("database_url")
    engine = make_engine(url or load_settings().database_url)
    try:
        with engine.connect() as connection:
            run(connection)
    finally:
        engine.dispose()


given: Any = context.config.attributes.get("connection")
if given is None:
    _command_line()
else:
    run(given)
