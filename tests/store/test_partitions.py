"""PostgreSQL's opt-in time partitions (`loopwatch store partition`): the conversion keeps
every row and places old traces, runs once, refuses SQLite; then a trace's rows live in one
partition, a row no partition covers still gets stored, and retention drops a partition
whose traces are all past the cutoff while one with an active trace goes row by row; the
sessions summary, tool sets and every other table stay right."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway import cli
from gateway.store.engine import create_schema, make_engine
from gateway.store.models import STEPS, TRACES
from gateway.store.partitions import ranges as partitions
from gateway.store.partitions.convert import partition_store
from gateway.store.partitions.ranges import Partition, missing
from gateway.store.read.queries import get_trace
from gateway.store.retention import partitions as partition_purge
from gateway.store.retention import traces as trace_purge
from gateway.store.retention.sweep import purge_batch
from gateway.store.retention.traces import bounded
from gateway.store.write.writer import StoreWriter
from tests.conftest import Database
from tests.factories import build_step
from tests.store.test_retention import NOW, _trace, assert_no_orphans
from tests.store.test_session_summary import grouped, summary

DAY = timedelta(days=1)
OLD = NOW - 40 * DAY
CUTOFF = NOW - 30 * DAY
DAYS = [{"type": "function", "function": {"name": "only_the_dropped_day_had_this"}}]


@pytest.fixture
def pg(postgres_database: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """A store converted to partitions, with day partitions from 45 days before NOW to a
    day after."""
    monkeypatch.setattr(trace_purge.time, "sleep", lambda _: None)
    engine = make_engine(postgres_database.url)
    create_schema(engine)
    assert partition_store(engine)
    partitions.ensure(engine, NOW - 45 * DAY, NOW + DAY, 1)
    yield engine
    engine.dispose()


def _partition_of(engine: Engine, trace_id: str) -> set[str]:
    """The partitions holding the trace's steps, items and violations."""
    found: set[str] = set()
    with engine.connect() as conn:
        for table, key in (("steps", "trace_id"), ("violations", "trace_id")):
            query = f"SELECT DISTINCT tableoid::regclass::text FROM {table} WHERE {key} = %(t)s"
            found.update(conn.exec_driver_sql(query, {"t": trace_id}).scalars())
        query = (
            "SELECT DISTINCT i.tableoid::regclass::text FROM items i "
            "JOIN steps s ON s.id = i.step_id WHERE s.trace_id = %(t)s"
        )
        found.update(conn.exec_driver_sql(query, {"t": trace_id}).scalars())
    return {name.split("__", 1)[1] for name in found}


def _listed(engine: Engine) -> list[Partition]:
    with engine.connect() as conn:
        return partitions.listed(conn)


def test_a_trace_keeps_its_rows_in_the_partition_it_started_in(pg: Engine) -> None:
    writer = StoreWriter(pg)
    evening = OLD.replace(hour=23, minute=59)
    _trace(writer, pg, "overnight", evening)  # its refusal comes after midnight
    writer.write_batch([build_step("overnight", at=evening + DAY)])  # and a step a day later
    assert _partition_of(pg, "overnight") == {f"p{evening:%Y%m%d}"}
    # Where no partition is made (far ahead), rows still go in: the DEFAULT partition.
    _trace(writer, pg, "far-ahead", NOW + 400 * DAY)
    assert _partition_of(pg, "far-ahead") == {"default"}


def test_retention_drops_whole_partitions_and_deletes_rows_where_one_straddles(
    pg: Engine,
) -> None:
    writer = StoreWriter(pg)
    for n in range(3):  # a day whose traces are all idle: its partition goes whole
        writer.write_batch([build_step(f"old-{n}", at=OLD, session_id="s1", declared_tools=DAYS)])
        _trace(writer, pg, f"old-{n}", OLD + timedelta(minutes=n))
    busy_day = OLD - 2 * DAY  # a day with a run still active: its idle traces go by rows
    _trace(writer, pg, "busy-idle", busy_day)
    _trace(writer, pg, "busy-active", busy_day + timedelta(hours=1))
    writer.write_batch([build_step("busy-active", at=NOW - DAY, session_id="s1")])
    for n in range(2):
        _trace(writer, pg, f"recent-{n}", NOW - 2 * DAY)
    writer.write_batch([build_step("recent-0", at=NOW - 2 * DAY, session_id="s1")])
    old_day = Partition(OLD.replace(hour=0, tzinfo=None), OLD.replace(hour=0, tzinfo=None) + DAY)
    assert old_day in _listed(pg) and summary(pg)["s1"][0] == 5

    purged = 0
    while done := purge_batch(pg, CUTOFF, 500):
        purged += done

    assert purged == 4
    listed = _listed(pg)
    assert old_day not in listed  # dropped
    assert any(p.lower <= busy_day.replace(tzinfo=None) < p.upper for p in listed)  # kept
    with pg.connect() as conn:
        traces = set(conn.execute(sa.select(TRACES.c.id)).scalars())
        steps = set(conn.execute(sa.select(STEPS.c.trace_id)).scalars())
    assert traces == steps == {"busy-active", "recent-0", "recent-1"}
    assert summary(pg) == grouped(pg) and summary(pg)["s1"][0] == 2
    with pg.connect() as conn:
        rows = conn.execute(sa.text("SELECT tools FROM tool_sets")).scalars()
        names = {tools[0]["function"]["name"] for tools in rows}
    assert names == {"every_run_has_this", "only_old_runs_had_this"}  # the dropped day's went
    assert_no_orphans(pg)


def test_a_partition_gets_a_trace_placed_again_before_its_drop(pg: Engine) -> None:
    """A replayed old record makes a trace in a partition retention is emptying: the
    partition stays until that trace goes too; nothing is lost or left orphaned."""
    writer = StoreWriter(pg)
    _trace(writer, pg, "old", OLD)
    (part,) = [p for p in _listed(pg) if p.lower <= OLD.replace(tzinfo=None) < p.upper]
    assert bounded(pg, partial(partition_purge._forget_some, part=part, cutoff=CUTOFF)) == 1
    _trace(writer, pg, "replayed", OLD + timedelta(hours=1))  # placed in that day again
    assert bounded(pg, partial(partition_purge._drop, part=part)) == 0
    assert part in _listed(pg)
    assert purge_batch(pg, CUTOFF, 500) == 1
    assert part not in _listed(pg)
    with pg.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(STEPS)).scalar_one() == 0
    assert_no_orphans(pg)


def test_partitions_made_cover_the_gaps_whatever_the_width_of_their_neighbours() -> None:
    day = datetime(2026, 12, 1)
    week = Partition(day + 2 * DAY, day + 9 * DAY)
    made = missing([week], day, day + 12 * DAY, 1)
    assert made == [
        Partition(day, day + DAY),
        Partition(day + DAY, day + 2 * DAY),
        Partition(day + 9 * DAY, day + 10 * DAY),
        Partition(day + 10 * DAY, day + 11 * DAY),
        Partition(day + 11 * DAY, day + 12 * DAY),
        Partition(day + 12 * DAY, day + 13 * DAY),
    ]
    weeks = missing([Partition(day, day + DAY)], day, day + 8 * DAY, 7)
    monday = datetime(2026, 11, 30)  # weeks run Monday to Monday, around the day there is
    assert weeks == [
        Partition(monday, day),
        Partition(day + DAY, monday + 7 * DAY),
        Partition(monday + 7 * DAY, monday + 14 * DAY),
    ]


def test_a_drop_waits_briefly_for_busy_tables_and_leaves_them_to_a_later_pass(
    pg: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_purge, "DROP_TRIES", 2)
    _trace(StoreWriter(pg), pg, "old", OLD)
    (part,) = [p for p in _listed(pg) if p.lower <= OLD.replace(tzinfo=None) < p.upper]
    with pg.connect() as reader, reader.begin():  # a long read holds the tables meanwhile
        reader.execute(sa.select(sa.func.count()).select_from(STEPS))
        assert purge_batch(pg, CUTOFF, 500) == 1  # the trace row goes, its partition stays
        assert part in _listed(pg)
    assert purge_batch(pg, CUTOFF, 500) == 0
    assert part not in _listed(pg)
    assert_no_orphans(pg)


def test_the_conversion_keeps_and_places_old_rows_and_runs_once(
    postgres_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = make_engine(postgres_database.url)
    try:
        create_schema(engine)
        writer = StoreWriter(engine)
        _trace(writer, engine, "before", OLD)
        with engine.begin() as conn:  # as a trace stored before revision 0011 is
            for table in ("traces", "steps", "items", "violations"):
                conn.exec_driver_sql(f"UPDATE {table} SET placed_at = NULL")
        assert not partitions.partitioned(engine)  # unpartitioned: no partition is made
        assert partitions.ensure(engine, NOW, NOW + DAY, 1) == []
        unconverted = get_trace(engine, "before")
        assert unconverted is not None
        url = postgres_database.url
        assert cli.main(["store", "partition", "--database-url", url]) == 0
        assert capsys.readouterr().out == "time partitions made\n"
        assert cli.main(["store", "partition", "--database-url", url]) == 0
        assert capsys.readouterr().out == "the store is already partitioned\n"
    finally:
        engine.dispose()
    converted = make_engine(postgres_database.url)  # a gateway restarted after
    try:
        assert partitions.partitioned(converted)
        assert _partition_of(converted, "before") == {f"p{OLD:%Y%m%d}"}
        assert get_trace(converted, "before") == unconverted
        writer = StoreWriter(converted)
        writer.write_batch([build_step("before", at=NOW)])  # its new step joins its partition
        assert _partition_of(converted, "before") == {f"p{OLD:%Y%m%d}"}
        assert_no_orphans(converted)
    finally:
        converted.dispose()


def test_an_unpartitioned_store_places_traces_alone_and_a_conversion_places_their_rows(
    postgres_database: Database,
) -> None:
    """Unpartitioned, a trace row keeps its placement and its steps, items and violations
    leave theirs null (8 bytes a row); the conversion places them from the trace, and a
    writer that started before it places its next rows (it reads the layout every batch)."""
    engine = make_engine(postgres_database.url)
    try:
        create_schema(engine)
        writer = StoreWriter(engine)
        _trace(writer, engine, "early", OLD)
        placed = "SELECT count(placed_at), count(*) FROM {}"
        worded = "SELECT count(*) FROM items WHERE search_words <> ''"
        with engine.connect() as conn:
            assert conn.exec_driver_sql(placed.format("traces")).one() == (1, 1)
            for table in partitions.PARTITIONED:
                unplaced = conn.exec_driver_sql(placed.format(table)).one()
                assert unplaced[0] == 0 and unplaced[1] > 0, table
            words = conn.exec_driver_sql(worded).scalar()
        assert words
        converter = make_engine(postgres_database.url)  # the operator's command
        try:
            assert partition_store(converter)
            partitions.ensure(converter, NOW - DAY, NOW + DAY, 1)
        finally:
            converter.dispose()
        assert _partition_of(engine, "early") == {f"p{OLD:%Y%m%d}"}
        with engine.connect() as conn:  # the items' words moved with them
            assert conn.exec_driver_sql(worded).scalar() == words
        writer.write_batch([build_step("early", at=NOW), build_step("late", at=NOW)])
        assert _partition_of(engine, "early") == {f"p{OLD:%Y%m%d}"}
        (late,) = _partition_of(engine, "late")  # one range partition (of a week here)
        assert late.startswith("p") and late != f"p{OLD:%Y%m%d}"
        with engine.connect() as conn:
            for table in partitions.PARTITIONED:
                counted = conn.exec_driver_sql(placed.format(table)).one()
                assert counted[0] == counted[1], table
        assert_no_orphans(engine)
    finally:
        engine.dispose()


def test_the_conversion_refuses_sqlite_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli.main(["store", "partition", "--database-url", url]) == 2
    error = capsys.readouterr().err
    assert error.startswith("loopwatch: time partitions need PostgreSQL") and error.count("\n") == 1
    assert not (tmp_path / "store.db").exists()
