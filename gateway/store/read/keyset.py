"""The seek of keyset pagination: the rows after a cursor, in an order largest first by
(key, id), as one row-value comparison `(key, id) < (:key, :id)`. SQLite (3.15 and later) and
PostgreSQL answer it with a range scan of the index on (key, id); the equivalent OR of two
comparisons makes them read the index from its end and filter row by row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa


def before(columns: Sequence[Any], values: Sequence[Any]) -> Any:
    """`(columns) < (values)`, each value bound with its column's type (a float bound
    against an integer column would make PostgreSQL cast the column and skip the index)."""
    typed = [sa.literal(value, column.type) for column, value in zip(columns, values, strict=True)]
    return sa.tuple_(*columns) < sa.tuple_(*typed)
