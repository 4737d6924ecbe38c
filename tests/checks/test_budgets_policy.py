"""Budget policy without the ledger: cost and time limits, headers, clamps, refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gateway.checks import budgets
from gateway.checks.budgets import (
    COST_HEADER,
    DURATION_HEADER,
    Limits,
    Spent,
    cost_clamp,
    cost_used_nano,
    cost_wanted_nano,
    limits_for,
    nano_usd,
    refusal,
    remaining_headers,
    tightest,
    token_price_nano,
)
from gateway.config import KeyBudget
from gateway.config_load import load_settings
from gateway.errors import BadRequest, BudgetExceeded, ConfigError
from gateway.items import Usage, ViolationKind
from gateway.protocols.openai_chat.completions import ADAPTER as CHAT
from gateway.runs.pricing import Pricer

KEY = KeyBudget(key_fingerprint="0" * 32, max_cost_usd=Decimal("2"), max_duration_s=600)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_cost_and_time_limits_only_tighten() -> None:
    settings = load_settings({}, {"LOOPWATCH_MAX_COST_USD": "5", "LOOPWATCH_MAX_DURATION_S": "900"})
    assert limits_for(settings, None, {}) == Limits(None, None, Decimal(5), 900.0)
    assert limits_for(settings, KEY, {}) == Limits(None, None, Decimal(2), 600.0)
    tighter = {COST_HEADER: "0.25", DURATION_HEADER: "30.5"}
    assert limits_for(settings, KEY, tighter) == Limits(None, None, Decimal("0.25"), 30.5)
    looser = {COST_HEADER: "100", DURATION_HEADER: "86400"}
    assert limits_for(settings, KEY, looser) == Limits(None, None, Decimal(2), 600.0)
    # A header alone sets a budget where none was configured.
    only = limits_for(load_settings({}, {}), None, {COST_HEADER: " 1.5 "})
    assert only.max_cost_usd == Decimal("1.5") and only.any
    assert not limits_for(load_settings({}, {}), None, {}).any


@pytest.mark.parametrize("header", [COST_HEADER, DURATION_HEADER])
@pytest.mark.parametrize(
    "value", ["", "abc", "-1", "0", "0.000", "1e3", "inf", "nan", "1,5", "1" * 11, "0x10"]
)
def test_a_budget_header_that_does_not_parse_is_a_400_naming_it(header: str, value: str) -> None:
    with pytest.raises(BadRequest) as raised:
        limits_for(load_settings({}, {}), None, {header: value})
    assert raised.value.status == 400
    assert raised.value.param == header and header in raised.value.message


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"LOOPWATCH_MAX_COST_USD": "0"}, "max_cost_usd (LOOPWATCH_MAX_COST_USD)"),
        ({"LOOPWATCH_MAX_COST_USD": "ten"}, "max_cost_usd (LOOPWATCH_MAX_COST_USD)"),
        ({"LOOPWATCH_MAX_COST_USD": "1e12"}, "max_cost_usd (LOOPWATCH_MAX_COST_USD)"),
        ({"LOOPWATCH_MAX_DURATION_S": "-5"}, "max_duration_s (LOOPWATCH_MAX_DURATION_S)"),
        ({"LOOPWATCH_MAX_DURATION_S": "inf"}, "max_duration_s (LOOPWATCH_MAX_DURATION_S)"),
    ],
)
def test_bad_budget_settings_stop_start_up(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_settings({}, env)


def test_cost_budget_clamps_to_what_the_dollars_buy_then_refuses() -> None:
    """gpt-4o output is $10 per million tokens: 10,000 nano-dollars a token."""
    price = Pricer().output_price("gpt-4o")
    assert price == Decimal("0.00001") and token_price_nano(price) == 10_000
    limits = Limits(max_cost_usd=Decimal("0.05"))  # 50,000,000 nano-dollars
    wanted = cost_wanted_nano(limits, 1000, price)
    assert wanted == 10_000_000
    assert cost_clamp(wanted, price) == 1000
    # No completion limit: the ledger holds all that remains, clamped to what it buys.
    assert cost_wanted_nano(limits, None, price) is None
    assert cost_clamp(30_000_000, price) == 3000
    assert cost_clamp(25_000, price) == 2  # 2 tokens' worth of a nearly spent budget


def test_without_a_cost_budget_or_a_price_nothing_is_held_or_clamped() -> None:
    assert cost_wanted_nano(Limits(), 1000, Decimal("0.00001")) == 0
    unknown = Pricer().output_price("my-finetune")
    assert cost_wanted_nano(Limits(max_cost_usd=Decimal(1)), 1000, unknown) == 0
    assert cost_clamp(10**9, unknown) is None and token_price_nano(unknown) == 1
    assert cost_clamp(10**9, Decimal(0)) is None


def test_the_tightest_clamp_wins() -> None:
    assert tightest(None, None) is None
    assert tightest(500, None) == 500
    assert tightest(500, 120, None) == 120


def test_what_a_finished_step_spends() -> None:
    pricer = Pricer()
    cost = pricer.cost(Usage(prompt_tokens=1000, completion_tokens=200), "gpt-4o").usd
    assert cost_used_nano(cost, held_nano=99, usage_known=True) == 4_500_000
    assert cost_used_nano(None, held_nano=99, usage_known=True) == 0  # unpriced model
    assert cost_used_nano(None, held_nano=99, usage_known=False) == 99  # usage never came
    assert nano_usd(Decimal("0.0000000001")) == 1 and nano_usd(Decimal(0)) == 0


def test_cost_and_time_refusals() -> None:
    limits = Limits(max_cost_usd=Decimal("0.5"), max_duration_s=60)
    error, violation = refusal(Spent("cost", 7, 900, cost_used_nano=512_345_678), limits)
    assert isinstance(error, BudgetExceeded) and error.status == 429
    assert error.code == "cost_budget_exceeded" and error.headers["x-should-retry"] == "false"
    assert error.headers["X-Loopwatch-Cost-Remaining-Usd"] == "0.000000"
    assert "Cost budget spent: $0.512345 of $0.500000 used." in error.message
    assert violation.kind is ViolationKind.COST_BUDGET_EXCEEDED and violation.enforced
    assert CHAT.error_body(error)["error"]["code"] == "cost_budget_exceeded"
    error, violation = refusal(Spent("time", 3, 0, elapsed_s=61.4), limits)
    assert error.code == "time_budget_exceeded"
    assert "Time budget spent: 61 s of 60 s since the run's first request." in error.message
    assert violation.kind is ViolationKind.TIME_BUDGET_EXCEEDED
    # The step and token refusals read as before.
    error, _ = refusal(Spent("steps", 2, 0), Limits(max_steps=2))
    assert error.code == "step_budget_exceeded" and "2 of 2 steps" in error.message


def test_remaining_cost_header() -> None:
    limits = Limits(max_steps=5, max_cost_usd=Decimal("1.25"))
    headers = remaining_headers(limits, 2, 0, cost_used_nano=250_000_001)
    assert headers == {
        "X-Loopwatch-Steps-Remaining": "3",
        "X-Loopwatch-Cost-Remaining-Usd": "0.999999",
    }
    assert remaining_headers(limits, 2, 0) == {"X-Loopwatch-Steps-Remaining": "3"}
    assert budgets.dollars(Decimal("1E-12")) == "0.000000"
