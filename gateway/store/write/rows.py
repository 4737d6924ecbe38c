"""The rows of a batch as the database driver takes them: a step's row derived from
`gateway.step.STEP_FIELDS`, its items' rows, and one executemany a table.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway import jsoncodec
from gateway.items import Item, ItemKind
from gateway.mcp.texts import args_key
from gateway.step import STEP_FIELDS, StepRecord
from gateway.store.models import UTCDateTime

_COLUMNS = tuple((f.name, f.columns) for f in STEP_FIELDS if f.columns is not None)


def insert_many(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """One driver-level executemany: the rows of a batch skip SQLAlchemy's per-row
    compilation and type processing (values are converted here, as those types would)."""
    if not rows:
        return
    columns = list(rows[0])
    values = driver_values(conn, table, columns, rows)
    if conn.dialect.name == "postgresql":
        _copy(conn, table, columns, values)
        return
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    )
    conn.exec_driver_sql(sql, values)


def _copy(conn: Connection, table: sa.Table, columns: list[str], values: list[Any]) -> None:
    """PostgreSQL's COPY: one stream for the batch's rows, no statement executed per row."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        with cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in values:
                copy.write_row(row)
    finally:
        cursor.close()


def driver_values(
    conn: Connection, table: sa.Table, columns: list[str], rows: list[dict[str, Any]]
) -> list[Any]:
    """Each row's values in `columns` order, converting only the columns that need it."""
    take = operator.itemgetter(*columns)
    # A column the models leave out (PostgreSQL's stored words) goes as it is.
    convert = [
        converter(conn, table.c[name].type) if name in table.c else _same for name in columns
    ]
    needed = [(index, f) for index, f in enumerate(convert) if f is not _same]
    values = []
    for row in rows:
        value = list(take(row)) if len(columns) > 1 else [take(row)]
        for index, f in needed:
            value[index] = f(value[index])
        values.append(tuple(value))
    return values


def placeholder(conn: Connection) -> str:
    """The driver's parameter mark: sqlite3's qmark, psycopg's format style."""
    return "?" if conn.dialect.name == "sqlite" else "%s"


def _same(value: Any) -> Any:
    return value


def _json(value: Any) -> str:
    # Like sa.JSON: None is stored as JSON null, not SQL NULL.
    return jsoncodec.dumps_text(value)


def _sqlite_time(value: datetime | None) -> str | None:
    # UTCDateTime's naive UTC, in SQLAlchemy's SQLite DATETIME text format.
    if value is None:
        return None
    if value.tzinfo is not UTC and value.tzinfo is not None:
        value = value.astimezone(UTC)
    # A UTC time's text less its "+00:00": no naive copy made first.
    return value.isoformat(" ", "microseconds")[:26]


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else _naive_utc(value)


def _naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None)


def converter(conn: Connection, column_type: Any) -> Any:
    """How a value of `column_type` goes to the driver, as the type's bind processing would."""
    if isinstance(column_type, sa.JSON):
        return _json
    if isinstance(column_type, UTCDateTime):
        return _sqlite_time if conn.dialect.name == "sqlite" else _utc
    return _same


def step_row(record: StepRecord, seq: int) -> dict[str, Any]:
    """The steps row of a record: each field's columns as `STEP_FIELDS` declares them."""
    row: dict[str, Any] = {"seq": seq}
    for name, columns in _COLUMNS:
        row.update(columns(getattr(record, name)))
    return row


def item_rows(step_id: str, direction: str, items: Iterable[Item]) -> list[dict[str, Any]]:
    return [
        {
            "step_id": step_id,
            "direction": direction,
            "position": position,
            "kind": item.kind.value,
            "role": item.role,
            "text": item.text,
            "call_id": item.call_id,
            "tool_name": item.tool_name,
            "arguments": item.arguments,
            "args_key": _args_key(direction, item),
            "is_error": item.is_error,
            "attrs": item.attrs,
        }
        for position, item in enumerate(items)
    ]


def _args_key(direction: str, item: Item) -> str | None:
    """Only the calls a step made: a history re-sends them, already keyed."""
    if direction != "output" or item.kind is not ItemKind.TOOL_CALL:
        return None
    return args_key(item.arguments)
