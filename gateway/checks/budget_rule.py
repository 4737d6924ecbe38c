"""The budget rule: whether a trace's counts allow one more step, and which budget refuses.

Declared once, as data (`RULE`): `refusing_budget` reads it for the in-process ledgers, and
the store's RESERVE statement renders it as its WHERE clause (gateway.store.ledger.core).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from decimal import Decimal
from operator import attrgetter, itemgetter
from typing import Any

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


# The names of Caps' fields: RESERVE's parameters are named after them.
CAP_NAMES = tuple(f.name for f in fields(Caps))


@dataclass(frozen=True, slots=True)
class Bound:
    """One budget: a trace may take one more step while its `count` (plus the cap named
    `floor`, if any) stays below the cap named `cap`, or reaches it at most (`inclusive`)."""

    budget: str  # the budget a refusal names
    count: str  # one of COUNTS
    cap: str  # one of CAP_NAMES
    inclusive: bool = False
    floor: str | None = None


# What the rule compares: steps taken; tokens and nano-dollars spent plus held in flight;
# seconds since the trace's first request (0 for a trace not yet started).
COUNTS = ("steps", "tokens", "cost", "elapsed")

# Checked in this order: the first bound that refuses names the refusal.
RULE: tuple[Bound, ...] = (
    Bound("steps", "steps", "max_steps"),
    Bound("tokens", "tokens", "max_tokens"),
    # Spending up to the cap is allowed, but a request must be able to buy one token.
    Bound("cost", "cost", "max_cost", inclusive=True, floor="cost_floor"),
    Bound("time", "elapsed", "max_duration"),
)


# RULE as refusing_budget walks it on each reservation: lookups resolved once.
_PLAN = tuple(
    (
        b.budget,
        COUNTS.index(b.count),
        attrgetter(b.cap),
        None if b.floor is None else attrgetter(b.floor),
        operator.le if b.inclusive else operator.lt,
    )
    for b in RULE
)


def refusing_budget(
    caps: Caps, steps: int, tokens: int, cost_nano: int, elapsed_s: float
) -> str | None:
    """The budget that refuses one more step ("steps", "tokens", "cost", "time", in RULE's
    order), or None when all allow it."""
    counts = (steps, tokens, cost_nano, elapsed_s)  # in COUNTS' order
    for budget, at, cap, floor, within in _PLAN:
        used = counts[at] if floor is None else counts[at] + floor(caps)
        if not within(used, cap(caps)):
            return budget
    return None


_CAPS_OF_PARAMS = itemgetter(*CAP_NAMES)


def caps_from(values: dict[str, Any]) -> Caps:
    """The caps back from RESERVE's parameters."""
    return Caps(*_CAPS_OF_PARAMS(values))
