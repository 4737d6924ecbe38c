"""One budget rule: declared once (budget_rule.RULE), it is what the ledger's RESERVE
statement renders and what every in-process ledger asks; both agree, case by case, on
whether a trace may take one more step and which budget refuses it."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import NamedTuple

import pytest
import sqlalchemy as sa

from gateway.checks.budget_rule import CAP_NAMES, COUNTS, RULE, Caps, refusing_budget
from gateway.checks.budgets import Limits
from gateway.store.engine import create_schema, make_engine
from gateway.store.ledger.core import ALLOWED, RESERVE, reserve_params

NOW = 1_000_000.0
PRICE = Decimal("0.00001")  # dollars per output token: 10 000 nano-dollars


class Case(NamedTuple):
    limits: Limits
    price: Decimal | None
    steps: int
    spent: int
    in_flight: int
    cost_spent: int  # nano-dollars
    cost_in_flight: int
    elapsed: float  # seconds since the trace started
    refused_by: str | None


CASES = [
    Case(Limits(), None, 500, 10**9, 0, 0, 0, 10**6, None),
    Case(Limits(max_steps=3), None, 2, 0, 0, 0, 0, 0.0, None),
    Case(Limits(max_steps=3), None, 3, 0, 0, 0, 0, 0.0, "steps"),
    Case(Limits(max_tokens=100), None, 1, 99, 0, 0, 0, 0.0, None),
    Case(Limits(max_tokens=100), None, 1, 60, 40, 0, 0, 0.0, "tokens"),
    Case(Limits(max_tokens=100), None, 1, 100, 0, 0, 0, 0.0, "tokens"),
    Case(Limits(max_cost_usd=Decimal("0.001")), PRICE, 1, 0, 0, 990_000, 0, 0.0, None),
    Case(Limits(max_cost_usd=Decimal("0.001")), PRICE, 1, 0, 0, 990_001, 0, 0.0, "cost"),
    Case(Limits(max_cost_usd=Decimal("0.001")), PRICE, 1, 0, 0, 500_000, 500_000, 0.0, "cost"),
    Case(Limits(max_cost_usd=Decimal("0.001")), None, 1, 0, 0, 999_999, 0, 0.0, None),
    Case(Limits(max_cost_usd=Decimal("0.001")), None, 1, 0, 0, 1_000_000, 0, 0.0, "cost"),
    Case(Limits(max_duration_s=60), None, 1, 0, 0, 0, 0, 59.5, None),
    Case(Limits(max_duration_s=60), None, 1, 0, 0, 0, 0, 60.0, "time"),
    Case(Limits(max_steps=2, max_tokens=10), None, 2, 10, 0, 0, 0, 0.0, "steps"),
    Case(Limits(max_tokens=10, max_duration_s=5), None, 1, 10, 0, 0, 0, 9.0, "tokens"),
]


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    engine = make_engine(f"sqlite:///{tmp_path}/rule.db")
    create_schema(engine)
    yield engine  # type: ignore[misc]
    engine.dispose()


@pytest.mark.parametrize("case", CASES, ids=[str(n) for n in range(len(CASES))])
def test_sql_and_python_agree(engine: sa.Engine, case: Case) -> None:
    limits, price, steps, spent, in_flight, cost_spent, cost_in_flight, elapsed, want = case
    with engine.begin() as db:
        db.execute(
            sa.text(
                "INSERT INTO budget_ledger (trace_id, steps, tokens_spent, tokens_in_flight,"
                " last_reserved, cost_spent, cost_in_flight, cost_last_held, started_at)"
                " VALUES ('run', :steps, :spent, :in_flight, 0, :cost, :cost_in_flight, 0,"
                " :started)"
            ),
            {
                "steps": steps,
                "spent": spent,
                "in_flight": in_flight,
                "cost": cost_spent,
                "cost_in_flight": cost_in_flight,
                "started": NOW - elapsed,
            },
        )
        params = reserve_params("run", limits, 10, price, now=NOW)
        admitted_by_sql = db.execute(sa.text(RESERVE), params).first() is not None
    counts = (steps, spent + in_flight, cost_spent + cost_in_flight, elapsed)
    refused_by = refusing_budget(Caps.of(limits, price), *counts)
    assert refused_by == want
    assert admitted_by_sql == (refused_by is None)


def test_reserve_renders_every_bound_of_the_rule_and_binds_its_caps() -> None:
    params = reserve_params("run", Limits(), None)
    assert ALLOWED in RESERVE and ALLOWED.count(" AND ") == len(RULE) - 1
    for bound in RULE:
        assert bound.count in COUNTS and bound.cap in CAP_NAMES
        assert f":{bound.cap}" in ALLOWED and bound.cap in params
        assert bound.floor is None or (bound.floor in CAP_NAMES and bound.floor in params)
