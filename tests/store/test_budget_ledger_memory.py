"""The ledger of a sole SQLite gateway keeps its counts in memory: racing reservations are
exact, tokens settle, and a restart resumes from what was written behind to its own file;
the same rules as the store's RESERVE statement, checked against ThreadLedger."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.checks.budgets import Limits, Reservation, Settlement, Spent
from gateway.store.engine import create_schema, make_engine
from gateway.store.ledger.core import ThreadLedger
from gateway.store.ledger.file import separate_sqlite_ledger
from gateway.store.ledger.memory import MemoryLedger
from tests.conftest import OpenEngine


def _ledger_engine(tmp_path: Path, open_engine: OpenEngine) -> Engine:
    """The ledger's own engine (its ledger closes it) beside a store made for the test."""
    url = f"sqlite:///{tmp_path}/lw.db"
    engine = open_engine(url)
    create_schema(engine)
    own = separate_sqlite_ledger(url, engine)
    assert own is not None and (tmp_path / "lw.db-ledger").exists()
    return own


async def test_racing_reservations_are_exact_and_a_restart_resumes(
    tmp_path: Path, open_engine: OpenEngine
) -> None:
    ledger = MemoryLedger(_ledger_engine(tmp_path, open_engine), Background())
    limits = Limits(max_steps=10, max_tokens=1000)
    granted = await asyncio.gather(*(ledger.reserve("run", limits, 30) for _ in range(25)))
    reservations = [g for g in granted if isinstance(g, Reservation)]
    assert len(reservations) == 10
    assert all(isinstance(g, Spent) and g.budget == "steps" for g in granted[10:])
    for reservation in reservations:
        ledger.settle_later(Settlement(reservation, used_tokens=20))
    await ledger.close()

    again = MemoryLedger(_ledger_engine(tmp_path, open_engine), Background())
    refused = await again.reserve("run", limits, 30)
    assert isinstance(refused, Spent) and (refused.steps_used, refused.tokens_used) == (10, 200)
    fresh = await again.reserve("other", limits, 30)
    assert isinstance(fresh, Reservation) and fresh.steps_used == 1
    await again.close()


async def test_the_same_answers_as_the_store_statement(
    tmp_path: Path, open_engine: OpenEngine
) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    memory = MemoryLedger(_ledger_engine(tmp_path / "m", open_engine), Background())
    store = ThreadLedger(make_engine(f"sqlite:///{tmp_path}/s/ledger.db"))
    create_schema(open_engine(f"sqlite:///{tmp_path}/s/ledger.db"))
    limits = Limits(max_steps=6, max_tokens=100)
    for want in (40, 40, 40, None, 10, 10, 10):
        ours, theirs = (
            await memory.reserve("t", limits, want),
            await store.reserve("t", limits, want),
        )
        assert type(ours) is type(theirs)
        if isinstance(ours, Reservation) and isinstance(theirs, Reservation):
            assert (ours.tokens, ours.steps_used, ours.tokens_left, ours.clamp) == (
                theirs.tokens,
                theirs.steps_used,
                theirs.tokens_left,
                theirs.clamp,
            )
            memory.settle_later(Settlement(ours, used_tokens=5))
            await store.settle(Settlement(theirs, used_tokens=5))
        else:
            assert isinstance(ours, Spent) and isinstance(theirs, Spent)
            assert (ours.budget, ours.steps_used, ours.tokens_used) == (
                theirs.budget,
                theirs.steps_used,
                theirs.tokens_used,
            )
    await memory.close()
    await store.close()
