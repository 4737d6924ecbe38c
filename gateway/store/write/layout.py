"""What the stored schema asks of the batch writer now, read from PostgreSQL's catalog in one
statement a batch: whether `steps`, `items` and `violations` are time-partitioned (their
rows then carry their trace's placement, the partition key), and whether items carry the
words the writer cuts (revision 0014) or the server makes them (a generated column before).

Read every batch, not once: a store converted (`loopwatch store partition`) or upgraded by
another process while this writer runs is written right from its next batch.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy.engine import Connection

_QUERY = (
    "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table "
    "WHERE partrelid = to_regclass('steps')), "
    "coalesce((SELECT attgenerated = '' FROM pg_attribute WHERE attrelid = to_regclass('items') "
    "AND attname = 'search_words' AND NOT attisdropped), false)"
)


class Layout(NamedTuple):
    partitioned: bool
    words_written: bool


SQLITE = Layout(partitioned=False, words_written=False)


def read(conn: Connection) -> Layout:
    if conn.dialect.name != "postgresql":
        return SQLITE
    partitioned, words_written = conn.exec_driver_sql(_QUERY).one()
    return Layout(bool(partitioned), bool(words_written))
