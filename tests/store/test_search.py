"""Search (`q=`) on SQLite and PostgreSQL: words, ids by prefix, purged traces, the time limit,
the full-text index as the writer keeps it, and stores upgraded from the revision before."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ClauseElement

from gateway.items import Item, ItemKind
from gateway.store.engine import create_schema, make_engine
from gateway.store.migrate import alembic_config
from gateway.store.read import search
from gateway.store.read.deadline import ReadTimedOut
from gateway.store.read.filters import TraceFilters
from gateway.store.read.queries import list_traces
from gateway.store.read.search import fts5_query, next_prefix, tokens
from gateway.store.retention.sweep import purge_batch
from gateway.store.write import fulltext
from gateway.store.write.rows import insert_many, item_rows, step_row
from gateway.store.write.writer import StoreWriter
from tests.conftest import Database
from tests.factories import T0, build_step
from tests.store.older_revision import store_at, write_as_at_its_revision

COMMON = "common"  # in every trace below
TABLES = ("traces", "steps", "items")
TRACE_DEFAULTS = {"status_final": False, "step_count": 2, "models": [], "violation_count": 0,
                  "cost_nano": 0} | dict.fromkeys(
    ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens"), 0
)  # fmt: skip


def _found(engine: Engine, q: str, **kwargs: object) -> list[str]:
    page = list_traces(engine, filters=TraceFilters(q=q), limit=200, **kwargs)  # type: ignore[arg-type]
    return [trace["id"] for trace in page["traces"]]


def _trace(trace_id: str, minute: int, words: str) -> list[object]:
    """Two steps: a tool result holding `words`, then a tool call with a named call id."""
    result = Item(ItemKind.TOOL_RESULT, role="tool", text=f"{COMMON} {words}", call_id="c0")
    call = Item(
        ItemKind.TOOL_CALL, role="assistant", call_id=f"call_{trace_id}", tool_name="read_file"
    )
    at = T0 + timedelta(minutes=minute)
    return [
        build_step(trace_id, step_id=f"step-{trace_id}-1", at=at, input_items=[result]),
        build_step(trace_id, step_id=f"step-{trace_id}-2", at=at, output_items=[call]),
    ]


@pytest.fixture
def stored(engine: Engine) -> Iterator[Engine]:
    """Thirty traces `t00`..`t29`, newest last; `t07` alone mentions Zanzibar."""
    records: list[object] = []
    for n in range(30):
        words = "sunny in Zanzibar today" if n == 7 else f"cloudy day number{n}"
        records += _trace(f"t{n:02d}", n, words)
    StoreWriter(engine).write_batch(records)  # type: ignore[arg-type]
    yield engine


def test_a_rare_word_finds_its_trace(stored: Engine) -> None:
    assert _found(stored, "zanzibar") == ["t07"]  # any case
    assert _found(stored, "Zanzibar sunny") == ["t07"]  # every word, any order
    assert _found(stored, "zanzibar cloudy") == []  # one item must hold them all
    assert _found(stored, "read_file") == [f"t{n:02d}" for n in reversed(range(30))]


def test_a_common_word_lists_its_traces_newest_first(stored: Engine) -> None:
    assert _found(stored, COMMON) == [f"t{n:02d}" for n in reversed(range(30))]
    page = list_traces(stored, filters=TraceFilters(q=COMMON), limit=10)
    rest = list_traces(stored, filters=TraceFilters(q=COMMON), limit=50, cursor=page["next_cursor"])
    assert [t["id"] for t in page["traces"] + rest["traces"]] == _found(stored, COMMON)


@pytest.mark.parametrize("common_share", [0.0, 2.0], ids=["walked", "gin"])
def test_a_word_in_more_items_than_read_lists_its_newest(
    stored: Engine, monkeypatch: pytest.MonkeyPatch, common_share: float
) -> None:
    """Either way PostgreSQL reads a word's matches (walking the newest items for a common
    word, from the GIN index for any other), the same newest are kept."""
    monkeypatch.setattr(search, "COMMON_SHARE", common_share)
    monkeypatch.setattr(search, "MAX_WORD_MATCHES", 3)  # items: t29's, t28's and t27's
    assert _found(stored, COMMON) == ["t29", "t28", "t27"]
    assert _found(stored, "zanzibar") == ["t07"]  # a rarer word still finds all its traces


def test_ids_are_found_by_prefix(stored: Engine) -> None:
    assert _found(stored, "t1") == [f"t{n}" for n in range(19, 9, -1)]  # trace ids
    assert _found(stored, "step-t07-") == ["t07"]  # step ids
    assert _found(stored, "call_t2") == [f"t{n}" for n in range(29, 19, -1)]  # call ids
    assert _found(stored, "req_") == []  # no provider request ids were recorded
    assert _found(stored, "STEP-T07-") == []  # ids are exact about case


def test_nothing_matches(stored: Engine) -> None:
    assert _found(stored, "nowhere") == []
    assert _found(stored, "zanzibar nowhere") == []
    assert _found(stored, '"*-') == []  # no words, no id: nothing, never an error
    assert _found(stored, "NEAR(zanzibar) AND") == []  # FTS5 syntax is read as words


def test_purged_traces_vanish_from_search(stored: Engine, database: Database) -> None:
    assert purge_batch(stored, T0 + timedelta(minutes=10), limit=100) == 10
    assert _found(stored, "zanzibar") == []
    assert _found(stored, COMMON) == [f"t{n:02d}" for n in reversed(range(10, 30))]
    StoreWriter(stored).write_batch(_trace("fresh", 60, "Zanzibar again"))  # type: ignore[arg-type]
    assert _found(stored, "zanzibar") == ["fresh"]
    if database.dialect == "sqlite":  # the index agrees with the items it covers, row by row
        with stored.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO items_fts(items_fts, rank) VALUES ('integrity-check', 1)"
            )


def test_a_search_past_its_time_limit_is_stopped(stored: Engine, database: Database) -> None:
    if database.dialect == "sqlite":  # the progress handler sees the deadline already passed
        with pytest.raises(ReadTimedOut):
            _found(stored, COMMON, search_timeout=1e-9)
    else:  # a lock keeps the search waiting until PostgreSQL's statement timeout ends it
        blocker = database.raw_connect()
        blocker.execute("BEGIN")
        blocker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        try:
            with pytest.raises(ReadTimedOut, match=r"0\.05 s"):
                _found(stored, COMMON, search_timeout=0.05)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert _found(stored, "zanzibar") == ["t07"]  # the connection is usable again, unlimited
    assert list_traces(stored, limit=1)["traces"][0]["id"] == "t29"  # reads without q


def test_search_builds_no_expression_at_import() -> None:
    """An expression built at import is compiled by whichever dialect was loaded then (a
    `to_tsvector` built before PostgreSQL's failed every search): only tables are global."""
    built = {
        name
        for name, value in vars(search).items()
        if isinstance(value, ClauseElement) and not isinstance(value, sa.Table)
    }
    assert built == set()


@pytest.mark.parametrize("revision", ["0005", "0009"])
def test_a_store_at_a_revision_before_upgrades_and_finds_old_data(
    database: Database, revision: str
) -> None:
    """From before the batched full-text index (0006) and before PostgreSQL's lean stored
    words (0010): old items are found by their words and their call ids by prefix."""
    engine = make_engine(database.url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)
        records: list[Any] = []
        for n in range(3):
            records += _trace(f"old{n}", n, "Zanzibar" if n == 1 else "plain")
        _store_as_then(conn, records, indexed=revision >= "0006")
    create_schema(engine)  # the start-up upgrade
    assert _found(engine, "zanzibar") == ["old1"]
    assert _found(engine, "old") == ["old2", "old1", "old0"]
    assert _found(engine, "call_old1") == ["old1"]
    assert _found(engine, "read_file") == ["old2", "old1", "old0"]
    with engine.connect() as conn:
        triggers = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        if database.dialect == "sqlite":
            assert conn.exec_driver_sql(triggers).all() == []
            counted = conn.exec_driver_sql("SELECT count(*) FROM items_fts('zanzibar')")
            assert counted.scalar() == 1  # once: not by a trigger and the writer both
    assert purge_batch(engine, T0 + timedelta(minutes=2), limit=10) == 2
    assert _found(engine, "zanzibar") == []
    engine.dispose()


def _store_as_then(conn: Connection, records: list[Any], *, indexed: bool) -> None:
    """Rows as the revision before stores them: today's rows cut to the columns it has;
    `indexed`, SQLite's full-text index kept by the writer (0006 on), not by triggers."""
    tables = sa.MetaData()
    traces, steps, items = (sa.Table(n, tables, autoload_with=conn) for n in TABLES)
    for seq, record in enumerate(records, start=1):
        at = record.started_at.replace(tzinfo=None)
        trace = {"id": record.trace_id, "started_at": at, "updated_at": at, "status": "running"}
        trace |= TRACE_DEFAULTS
        if seq % 2:
            conn.execute(traces.insert(), [_known(traces, trace)])
        insert_many(conn, steps, [_known(steps, step_row(record, 2 - seq % 2))])
        for direction in ("input", "output"):
            rows = item_rows(record.id, direction, getattr(record, f"{direction}_items"))
            insert_many(conn, items, [_known(items, row) for row in rows])
        if indexed:
            fulltext.index_steps(conn, [record.id])


def _known(table: sa.Table, row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key in table.c}


def test_batch_indexes_its_items_in_one_statement(engine: Engine, database: Database) -> None:
    statements: list[str] = []

    def spy(*args: object) -> None:
        statement = str(args[2]).lstrip().upper()
        if "ITEMS_FTS" in statement:
            statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", spy)
    try:
        StoreWriter(engine).write_batch([build_step(f"b{n}", items=5) for n in range(20)])
    finally:
        sa.event.remove(engine, "before_cursor_execute", spy)
    assert len(statements) == (1 if database.dialect == "sqlite" else 0)


def test_query_words_are_single_terms() -> None:
    assert tokens("get_weather, call-abc123 Zürich") == [
        "get",
        "weather",
        "call",
        "abc123",
        "Zürich",
    ]
    assert fts5_query('say "hi" NEAR') == '"say" "hi" "NEAR"'
    assert fts5_query("--- ***") is None
    assert next_prefix("ab") == "ac"
    assert next_prefix("a\U0010ffff") == "b"
    assert next_prefix("a\ud7ff") == "a\ue000"


def test_a_store_upgraded_to_fewer_merges_finds_words_written_before_and_after(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = store_at(database.url, "0011")  # the revision before fewer merges
    writer = StoreWriter(engine)
    with monkeypatch.context() as older:
        write_as_at_its_revision(older, engine)
        writer.write_batch(_trace("before", 0, "Zanzibar"))  # type: ignore[arg-type]
    create_schema(engine)  # the start-up upgrade
    for n in range(40):  # one full-text segment a batch: more than a level of 16 holds
        words = "Zanzibar" if n % 10 == 0 else f"plain{n}"
        writer.write_batch(_trace(f"after{n:02d}", n + 1, words))  # type: ignore[arg-type]
    assert _found(engine, "zanzibar") == ["after30", "after20", "after10", "after00", "before"]
    assert _found(engine, "plain39") == ["after39"]
    assert len(_found(engine, COMMON)) == 41
    if database.dialect == "sqlite":
        with engine.connect() as conn:
            config = dict(conn.exec_driver_sql("SELECT k, v FROM items_fts_config").all())
        assert (config["automerge"], config["crisismerge"]) == (16, 32)
    assert purge_batch(engine, T0 + timedelta(minutes=11), limit=100) == 11  # 0 to 10
    assert _found(engine, "zanzibar") == ["after30", "after20", "after10"]
    engine.dispose()


def _said(trace_id: str, minute: int, text: str) -> list[object]:
    """One step whose tool result says `text`."""
    result = Item(ItemKind.TOOL_RESULT, role="tool", text=text, call_id="c0")
    at = T0 + timedelta(minutes=minute)
    return [build_step(trace_id, step_id=f"step-{trace_id}", at=at, input_items=[result])]


def test_a_word_inside_a_path_a_host_or_a_number_is_found(engine: Engine) -> None:
    """Words are runs of letters and digits on both dialects: a path, a host or a version is
    found by any word in it, and by itself whole (all its words)."""
    writer = StoreWriter(engine)
    writer.write_batch(_said("paths", 0, "opened src/handler7.py on Docs.Example.com, v2.14"))  # type: ignore[arg-type]
    writer.write_batch(_said("other", 1, "nothing of the kind"))  # type: ignore[arg-type]
    for q in ("handler7", "src/handler7.py", "example", "docs.example.com", "14", "V2.14"):
        assert _found(engine, q) == ["paths"], q
    assert _found(engine, "handler7.rs") == []  # every word must be there


def test_items_stored_before_the_writer_cut_words_are_found_as_before(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Revision 0014: PostgreSQL's items stored before keep the words to_tsvector made (a
    path whole), those written after hold the writer's; a search finds either."""
    engine = store_at(database.url, "0012")  # before the writer cut words
    writer = StoreWriter(engine)
    write_as_at_its_revision(monkeypatch, engine)
    writer.write_batch(_said("before", 0, "Zanzibar at src/old7.py"))  # type: ignore[arg-type]
    monkeypatch.undo()
    create_schema(engine)  # the start-up upgrade, under the same writer
    writer.write_batch(_said("after", 1, "Zanzibar at src/new7.py"))  # type: ignore[arg-type]
    assert _found(engine, "zanzibar") == ["after", "before"]
    assert _found(engine, "src/old7.py") == ["before"]
    assert _found(engine, "src/new7.py") == ["after"]
    assert _found(engine, "new7") == ["after"]
    if database.dialect == "postgresql":
        with engine.connect() as conn:
            stored = conn.exec_driver_sql(
                "SELECT s.trace_id, i.search_words::text FROM items i "
                "JOIN steps s ON s.id = i.step_id WHERE i.kind = 'tool_result' ORDER BY s.trace_id"
            ).all()
        assert stored == [
            ("after", "'at' 'new7' 'py' 'src' 'zanzibar'"),
            ("before", "'at' 'src/old7.py' 'zanzibar'"),
        ]
    engine.dispose()


def test_an_item_with_more_words_than_a_tsvector_holds_is_stored(engine: Engine) -> None:
    """PostgreSQL keeps an item's words under 1 MiB and each under 2,047 bytes: a huge tool
    output is stored (to_tsvector failed it, and its whole batch), its first words found."""
    huge = " ".join(f"w{n}x" for n in range(250_000)) + " " + "a" * 5000
    StoreWriter(engine).write_batch(_said("huge", 0, huge))  # type: ignore[arg-type]
    assert _found(engine, "w7x") == ["huge"]
    assert get_trace_text(engine, "huge") == huge


def get_trace_text(engine: Engine, trace_id: str) -> str:
    with engine.connect() as conn:
        return str(
            conn.exec_driver_sql(
                "SELECT i.text FROM items i JOIN steps s ON s.id = i.step_id "
                f"WHERE s.trace_id = '{trace_id}'"
            ).scalar()
        )


def test_stored_words_are_lowercased_runs_of_letters_and_digits() -> None:
    assert fulltext.words("Get_Weather src/handler7.py Zürich ZÜRICH 3.14") == [
        "get",
        "weather",
        "src",
        "handler7",
        "py",
        "zürich",
        "3",
        "14",
    ]
    assert fulltext.words("--- ***") == []
    # A run longer than a lexeme holds is cut in lexemes, the same way stored and looked up.
    assert [len(w) for w in fulltext.words("a" * 2047 + "b" * 2953)] == [2047, 2047, 906]
    assert [len(w) for w in fulltext.words("é" * 511 + "Ü" * 689)] == [511, 511, 178]
    stored = fulltext.pg_words(["Hello hello", None, "read_file"]).split()
    assert sorted(set(stored)) == ["file", "hello", "read"]  # the server drops repeats
    text = "Run `pytest -k Foo_bar` (exit=2); see https://x.io/a?b=1#c, v1.2.3 & Q4 [OK]!"
    assert sorted(set(fulltext.pg_words([text]).split())) == sorted(fulltext.words(text))
    assert search.pg_query("Zanzibar src/x.py") == "'zanzibar' & 'src' & 'x' & 'py'"
    assert search.pg_query("--") is None
