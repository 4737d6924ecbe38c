"""Budget admission decided without I/O: `decide` says whether a request needs the ledger
(`Reserve`), and from the ledger's answer whether it goes to the provider (`Admit`, with the
budget headers to send) or is refused (`Refuse`). The proxy asks the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import overload

from gateway.checks import budgets
from gateway.checks.budgets import Limits, Reservation, Spent
from gateway.errors import BudgetExceeded
from gateway.items import Violation


@dataclass(frozen=True, slots=True)
class Reserve:
    """Ask the ledger for one step of the trace (and tokens and dollars for its answer)."""

    trace_id: str
    limits: Limits
    wanted_tokens: int | None  # the request's completion limit, if it sets one

    @property
    def priced(self) -> bool:
        """A cost budget applies: the ledger needs the model's output price."""
        return self.limits.max_cost_usd is not None


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The ledger gave no answer (it failed): the request goes unbudgeted."""


@dataclass(frozen=True, slots=True)
class Admit:
    limits: Limits
    reservation: Reservation | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # the budgets' remaining
    unbudgeted: bool = False  # budgets apply but the ledger failed: log and count it


@dataclass(frozen=True, slots=True)
class Refuse:
    error: BudgetExceeded
    violation: Violation
    limits: Limits


Answer = Reservation | Spent | Unavailable


@overload
def decide(limits: Limits, trace_id: str, wanted_tokens: int | None) -> Admit | Reserve: ...
@overload
def decide(
    limits: Limits, trace_id: str, wanted_tokens: int | None, answer: Answer
) -> Admit | Refuse: ...
def decide(
    limits: Limits, trace_id: str, wanted_tokens: int | None, answer: Answer | None = None
) -> Admit | Reserve | Refuse:
    """Without budgets a request is admitted untouched; with some, the ledger is asked
    first (`answer` None) and its answer decides."""
    if not limits.any:
        return Admit(limits)
    if answer is None:
        return Reserve(trace_id, limits, wanted_tokens)
    if isinstance(answer, Unavailable):
        return Admit(limits, unbudgeted=True)
    if isinstance(answer, Spent):
        error, violation = budgets.refusal(answer, limits)
        return Refuse(error, violation, limits)
    tokens_used = 0
    if limits.max_tokens is not None and answer.tokens_left is not None:
        tokens_used = limits.max_tokens - answer.tokens_left
    cost_used = None
    if limits.max_cost_nano is not None and answer.cost_left_nano is not None:
        cost_used = limits.max_cost_nano - answer.cost_left_nano
    headers = budgets.remaining_headers(
        limits, answer.steps_used, tokens_used, cost_used_nano=cost_used
    )
    return Admit(limits, answer, headers)
