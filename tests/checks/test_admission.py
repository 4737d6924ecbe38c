"""Admission without a ledger: the budgets' limits and the ledger's answer in, the decision
out (admit with the budgets' remaining headers, ask the ledger, or refuse)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.checks.admission import (
    Admit,
    Answer,
    Refuse,
    Reserve,
    Unavailable,
    decide,
)
from gateway.checks.budgets import Limits, Reservation, Spent
from gateway.items import ViolationKind

STEPS = Limits(max_steps=5)
TOKENS = Limits(max_steps=5, max_tokens=1000)
COST = Limits(max_cost_usd=Decimal("0.50"))
GRANTED = Reservation("t1", tokens=0, steps_used=2, tokens_left=None, clamp=None)
GRANTED_TOKENS = Reservation("t1", tokens=300, steps_used=3, tokens_left=400, clamp=300)
GRANTED_COST = Reservation(
    "t1", 0, 1, None, clamp=100, cost_held_nano=10_000_000, cost_left_nano=150_000_000
)

DECISIONS: dict[str, tuple[Limits, Answer | None, Admit | Reserve | Refuse]] = {
    "no budget: admitted, the ledger untouched": (Limits(), None, Admit(Limits())),
    "a budget: the ledger is asked first": (STEPS, None, Reserve("t1", STEPS, 200)),
    "the ledger grants a step": (
        STEPS,
        GRANTED,
        Admit(STEPS, GRANTED, {"X-Loopwatch-Steps-Remaining": "3"}),
    ),
    "the ledger grants steps and tokens": (
        TOKENS,
        GRANTED_TOKENS,
        Admit(
            TOKENS,
            GRANTED_TOKENS,
            {"X-Loopwatch-Steps-Remaining": "2", "X-Loopwatch-Tokens-Remaining": "400"},
        ),
    ),
    "the ledger grants dollars": (
        COST,
        GRANTED_COST,
        Admit(COST, GRANTED_COST, {"X-Loopwatch-Cost-Remaining-Usd": "0.150000"}),
    ),
    "the ledger fails: forwarded unbudgeted": (
        STEPS,
        Unavailable(),
        Admit(STEPS, unbudgeted=True),
    ),
}


@pytest.mark.parametrize(("limits", "answer", "decision"), DECISIONS.values(), ids=DECISIONS)
def test_admission(
    limits: Limits, answer: Answer | None, decision: Admit | Reserve | Refuse
) -> None:
    assert decide(limits, "t1", 200, answer) == decision


REFUSALS = {
    "steps": (STEPS, Spent("steps", 5, 0), ViolationKind.STEP_BUDGET_EXCEEDED),
    "tokens": (TOKENS, Spent("tokens", 4, 1000), ViolationKind.TOKEN_BUDGET_EXCEEDED),
    "cost": (COST, Spent("cost", 9, 0, 500_000_000), ViolationKind.COST_BUDGET_EXCEEDED),
    "time": (
        Limits(max_duration_s=60.0),
        Spent("time", 0, 0, elapsed_s=61.0),
        ViolationKind.TIME_BUDGET_EXCEEDED,
    ),
}


@pytest.mark.parametrize(("limits", "spent", "kind"), REFUSALS.values(), ids=REFUSALS)
def test_a_spent_budget_is_refused(limits: Limits, spent: Spent, kind: ViolationKind) -> None:
    decision = decide(limits, "t1", None, spent)
    assert isinstance(decision, Refuse)
    assert decision.limits == limits
    assert (decision.violation.kind, decision.violation.enforced) == (kind, True)
    assert (decision.error.status, decision.error.code) == (429, kind.value)


def test_the_steps_remaining_header_of_a_refusal_says_none_are_left() -> None:
    decision = decide(STEPS, "t1", None, Spent("steps", 5, 0))
    assert isinstance(decision, Refuse)
    assert decision.error.headers["X-Loopwatch-Steps-Remaining"] == "0"


@pytest.mark.parametrize(
    ("limits", "priced"),
    [(STEPS, False), (TOKENS, False), (COST, True), (Limits(max_duration_s=5.0), False)],
)
def test_only_a_cost_budget_asks_for_the_models_price(limits: Limits, priced: bool) -> None:
    decision = decide(limits, "t1", None)
    assert isinstance(decision, Reserve)
    assert decision.priced is priced
