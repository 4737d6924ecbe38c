"""The budget rule: whether a trace's counts allow one more step, and which budget refuses.

Every Python ledger asks `refusing_budget`; its SQL twin is the WHERE clause of the ledger's
RESERVE statement (gateway.store.ledger), and a test holds the two equal on a table of cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gateway.checks.budgets import Limits, token_price_nano

UNLIMITED = 2**62  # stands for a limit that is not set: every count stays below it


@dataclass(frozen=True, slots=True)
class Caps:
    """A request's limits as the rule compares them: each a number, UNLIMITED when not set."""

    max_steps: int
    max_tokens: int
    max_cost: int  # nano-dollars
    cost_floor: int  # nano-dollars: a request must be able to buy one output token
    max_duration: float  # seconds since the trace's first request

    @classmethod
    def of(cls, limits: Limits, output_price: Decimal | None) -> Caps:
        costed = limits.max_cost_usd is not None
        return cls(
            max_steps=limits.max_steps or UNLIMITED,
            max_tokens=limits.max_tokens or UNLIMITED,
            max_cost=UNLIMITED if limits.max_cost_nano is None else limits.max_cost_nano,
            cost_floor=token_price_nano(output_price) if costed else 0,
            max_duration=float(
                UNLIMITED if limits.max_duration_s is None else limits.max_duration_s
            ),
        )


def refusing_budget(
    caps: Caps, steps: int, tokens: int, cost_nano: int, elapsed_s: float
) -> str | None:
    """The budget that refuses one more step ("steps", "tokens", "cost", "time", checked in
    that order), or None when all allow it. `tokens` and `cost_nano` count what is spent
    plus what is held in flight; `elapsed_s` is 0 for a trace not yet started."""
    if steps >= caps.max_steps:
        return "steps"
    if tokens >= caps.max_tokens:
        return "tokens"
    if cost_nano + caps.cost_floor > caps.max_cost:
        return "cost"
    if elapsed_s >= caps.max_duration:
        return "time"
    return None
