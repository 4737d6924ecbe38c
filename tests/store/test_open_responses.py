"""The store's open background steps: opened, found, and taken by one of gateways racing to
end a step (DELETE ... RETURNING), on SQLite and PostgreSQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from sqlalchemy.engine import Engine

from gateway.store import open_responses
from gateway.store.engine import make_engine
from tests.conftest import Database

AT = datetime(2026, 12, 4, tzinfo=UTC)


def test_an_open_step_is_found_until_it_is_taken_once(engine: Engine) -> None:
    open_responses.put(engine, "resp_1", "trace-1", "step-1", AT, '{"seen": "queued"}')
    assert open_responses.find(engine, "resp_1") == '{"seen": "queued"}'
    assert open_responses.find(engine, "resp_other") is None

    assert open_responses.take(engine, "resp_1") == '{"seen": "queued"}'
    assert open_responses.take(engine, "resp_1") is None
    assert open_responses.find(engine, "resp_1") is None


def test_a_response_opened_again_keeps_its_latest_step(engine: Engine) -> None:
    open_responses.put(engine, "resp_2", "trace-2", "step-1", AT, "first")
    open_responses.put(engine, "resp_2", "trace-2", "step-2", AT, "second")
    assert open_responses.take(engine, "resp_2") == "second"


def test_of_gateways_racing_to_take_a_step_one_gets_it(engine: Engine, database: Database) -> None:
    # Each taker its own engine, as each gateway process has.
    engines = [make_engine(database.url) for _ in range(4)]
    try:
        for round_ in range(10):
            response_id = f"resp_race_{round_}"
            open_responses.put(engine, response_id, "trace-3", f"step-{round_}", AT, "open")
            with ThreadPoolExecutor(len(engines)) as pool:
                taken = list(pool.map(open_responses.take, engines, [response_id] * 4))
            assert taken.count("open") == 1 and taken.count(None) == 3
    finally:
        for each in engines:
            each.dispose()
