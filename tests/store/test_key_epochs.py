"""Key epochs: steps and their items take the writer's current epoch, a new one every
EPOCH_STEPS steps, and every lookup by a random key finds keys of every epoch, after
retention and in a store upgraded from the revision before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.items import Item, ItemKind
from gateway.mcp.texts import args_key
from gateway.step import StepRecord
from gateway.store import key_epochs
from gateway.store.engine import create_schema
from gateway.store.models import ITEMS, STEPS
from gateway.store.read import joins as mcp_joins
from gateway.store.read import key_walks, listing, queries
from gateway.store.retention.sweep import purge_batch
from gateway.store.write.writer import StoreWriter
from tests.conftest import Database
from tests.factories import T0, build_step
from tests.store.older_revision import store_at, write_as_at_its_revision

STEPS_AN_EPOCH = 2  # a batch of two steps fills an epoch


@pytest.fixture(autouse=True)
def small_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_epochs, "EPOCH_STEPS", STEPS_AN_EPOCH)


def _step(n: int) -> StepRecord:
    """Step `n` of trace `t{n}`: every random key it has names it."""
    result = Item(ItemKind.TOOL_RESULT, role="tool", text="done", call_id=f"call_in_{n}")
    call = Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=f"call_{n}",
        tool_name="read_file",
        arguments=f'{{"path": "f{n}"}}',
    )
    return build_step(
        f"t{n}",
        step_id=f"step-{n}",
        at=T0 + timedelta(minutes=n),
        input_items=[result],
        output_items=[call],
        response_id=f"resp_{n}",
        provider_request_id=f"req_{n}",
        continuation_key=f"key_{n}",
    )


def _write(engine: Engine, numbers: range) -> None:
    """Two steps a batch, so each batch starts the next epoch."""
    writer = StoreWriter(engine)
    for first in numbers[::2]:
        writer.write_batch([_step(n) for n in range(first, min(first + 2, numbers.stop))])


def _epochs_of_steps(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(STEPS.c.id, STEPS.c.key_epoch)).all())  # type: ignore[arg-type]


def _found_everywhere(engine: Engine, n: int) -> dict[str, Any]:
    """Each lookup by one of step `n`'s keys: what it found."""
    wanted = mcp_joins.Wanted(
        f"ex{n}", "read_file", frozenset({args_key(f'{{"path": "f{n}"}}')}), since=T0
    )
    return {
        "continuation": queries.find_continuation(engine, ["nope", f"key_{n}"]),
        "response": queries.find_by_response_id(engine, f"resp_{n}"),
        "by request id": queries.find_step(engine, f"req_{n}"),
        "emitters": queries.call_emitters(engine, [f"call_{n}"]),
        "prefix": listing.find_prefix(engine, f"resp_{n}"),
        "call id": listing.find_prefix(engine, f"call_{n}"),
        "mcp by args": mcp_joins.model_calls(engine, [wanted])[f"ex{n}"],
        "tool result": mcp_joins.tool_results(engine, {f"call_in_{n}"}),
    }


def _expected(n: int) -> dict[str, Any]:
    trace, step = f"t{n}", f"step-{n}"
    return {
        "continuation": (trace, step, f"key_{n}"),
        "response": (trace, step),
        "by request id": {"trace_id": trace, "step_id": step, "seq": 1},
        "emitters": [(f"call_{n}", trace, step)],
        "prefix": {"trace_id": trace, "step_id": step},
        "call id": {"trace_id": trace, "step_id": step},
        "mcp by args": [mcp_joins.Found(trace, f"call_{n}")],
        "tool result": {f"call_in_{n}": "done"},
    }


def test_each_epoch_holds_its_size_in_steps_and_lookups_find_keys_of_every_epoch(
    engine: Engine,
) -> None:
    _write(engine, range(7))
    epochs = _epochs_of_steps(engine)
    assert [epochs[f"step-{n}"] for n in range(7)] == [0, 0, 1, 1, 2, 2, 3]
    with engine.connect() as conn:
        item_epochs = set(conn.execute(sa.select(ITEMS.c.step_id, ITEMS.c.key_epoch)).all())
    assert item_epochs == set(epochs.items())  # an item takes its step's epoch
    for n in (0, 3, 6):  # the oldest epoch, one between, the newest
        assert _found_everywhere(engine, n) == _expected(n)


def test_the_start_up_walks_read_every_key_across_epochs_in_small_batches(engine: Engine) -> None:
    _write(engine, range(7))
    keys = [k for batch in key_walks.continuation_key_batches(engine, batch=3) for k in batch]
    calls = [c for batch in key_walks.emitted_call_id_batches(engine, batch=3) for c in batch]
    assert sorted(keys) == [f"key_{n}" for n in range(7)]
    assert sorted(calls) == [f"call_{n}" for n in range(7)]  # emitted calls, not the results


def test_lookups_find_the_keys_left_after_retention_empties_the_oldest_epochs(
    engine: Engine,
) -> None:
    _write(engine, range(7))
    assert purge_batch(engine, T0 + timedelta(minutes=3, seconds=30), limit=100) == 4
    assert queries.find_by_response_id(engine, "resp_1") is None
    for n in (4, 6):
        assert _found_everywhere(engine, n) == _expected(n)
    StoreWriter(engine).write_batch([_step(7)])
    assert _epochs_of_steps(engine)["step-7"] == 3  # the newest epoch had room for one
    assert _found_everywhere(engine, 7) == _expected(7)


def test_a_store_upgraded_to_key_epochs_finds_keys_written_before_and_after(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = store_at(database.url, "0012")  # the revision before key epochs
    with monkeypatch.context() as older:
        write_as_at_its_revision(older, engine)
        _write(engine, range(3))
    create_schema(engine)  # the start-up upgrade
    _write(engine, range(3, 6))
    epochs = _epochs_of_steps(engine)
    assert [epochs[f"step-{n}"] for n in range(6)] == [0, 0, 0, 1, 1, 2]
    for n in (1, 4, 5):
        assert _found_everywhere(engine, n) == _expected(n)
    engine.dispose()
