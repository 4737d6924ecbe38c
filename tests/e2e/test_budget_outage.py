"""Budgets through a store outage: enforced from this replica's counts, reconciled after.

The outage is real: another connection holds the ledger's table (PostgreSQL) or the whole
database (SQLite) locked, so the store's reservations wait until they time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from gateway.store.ledger.fallback import FallbackLedger
from tests.conftest import Database
from tests.fakes.chat import completion
from tests.harness import Gateway, make_gateway, provider  # noqa: F401

HELLO = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


async def ask(gw: Gateway, trace: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            gw.url + "/v1/chat/completions",
            json=HELLO,
            headers={"X-Loopwatch-Trace-Id": trace, "Authorization": "Bearer sk-test"},
        ) as r,
    ):
        return r.status, await r.json()


def ledger_connect(database: Database) -> Any:
    """The ledger's database: beside a SQLite store its own file, else the store."""
    if database.path is not None:
        ledger = database.path.with_name(database.path.name + "-ledger")
        return sqlite3.connect(ledger, isolation_level=None, timeout=10)
    return database.raw_connect()


@contextlib.contextmanager
def outage(database: Database) -> Iterator[None]:
    conn = ledger_connect(database)
    if database.dialect == "sqlite":
        conn.execute("BEGIN EXCLUSIVE")
    else:
        conn.autocommit = False
        conn.execute("LOCK TABLE budget_ledger IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        conn.rollback()
        conn.close()


def stored_steps(database: Database, trace: str) -> int:
    conn = ledger_connect(database)
    try:
        query = "SELECT steps FROM budget_ledger WHERE trace_id = " + (
            "?" if database.dialect == "sqlite" else "%s"
        )
        row = conn.execute(query, (trace,)).fetchone()
        return int(row[0])
    finally:
        conn.close()


async def test_step_budget_holds_through_an_outage_and_is_reconciled(
    make_gateway: Any, database: Database
) -> None:
    gw: Gateway = await make_gateway(max_steps=4)
    ledger = gw.deps.ledger
    assert isinstance(ledger, FallbackLedger)
    ledger.retry_seconds = 0.05  # probe the store again soon after it failed
    gw.provider.queue(*(completion(f"answer {n}") for n in range(10)))

    assert (await ask(gw, "outage-run"))[0] == 200  # counted by the store
    with outage(database):
        statuses = [(await ask(gw, "outage-run"))[0] for _ in range(5)]
        # A sole SQLite gateway decides from its counts in memory: it never needs the file.
        assert ledger.degraded is (database.dialect != "sqlite")
    # Three more steps fit the budget of four; the rest were refused without the store.
    assert statuses == [200, 200, 200, 429, 429]
    assert len(gw.provider.received) == 4

    # The store answers again: what was admitted meanwhile is added before it decides.
    await asyncio.sleep(ledger.retry_seconds * 2)  # past the pause after the last failure
    status, body = await ask(gw, "outage-run")
    assert (status, body["error"]["code"]) == (429, "step_budget_exceeded")
    assert not ledger.degraded
    for _ in range(100):  # written behind on SQLite
        if stored_steps(database, "outage-run") == 4:
            break
        await asyncio.sleep(0.05)
    assert stored_steps(database, "outage-run") == 4
    assert len(gw.provider.received) == 4
    # Another run starts from the store's counts as before.
    assert (await ask(gw, "fresh-run"))[0] == 200


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_a_request_without_budgets_never_touches_the_ledger(
    make_gateway: Any, database: Database
) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.queue(completion("free"))
    with outage(database):
        assert (await ask(gw, "unbudgeted"))[0] == 200
    assert not gw.deps.ledger.degraded  # type: ignore[attr-defined]
