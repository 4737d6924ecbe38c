"""Budget admission: reserve a step (and tokens) in the ledger before the provider is called.

The ledger keeps enforcing from local counts while the store does not answer
(store/ledger_fallback.py); only if the ledger itself fails is a request let through
unbudgeted (logged). With no budget configured the ledger is never touched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway import budgets
from gateway.budgets import Limits, Reservation, Settlement, Spent
from gateway.config import KeyBudget
from gateway.deps import Deps
from gateway.errors import BudgetExceeded
from gateway.items import Usage, Violation

log = logging.getLogger(__name__)

LEDGER_SECONDS = 2.0


@dataclass(slots=True)
class Admission:
    limits: Limits
    reservation: Reservation | None = None
    headers: dict[str, str] = field(default_factory=dict)
    settled: bool = False

    @property
    def clamp(self) -> int | None:
        return None if self.reservation is None else self.reservation.clamp


@dataclass(slots=True)
class Refused:
    error: BudgetExceeded
    violation: Violation
    limits: Limits


async def admit(
    deps: Deps,
    headers: Mapping[str, str],
    key: KeyBudget | None,
    trace_id: str,
    wanted_tokens: int | None,
) -> Admission | Refused:
    limits = budgets.limits_for(deps.settings, key, headers)
    if not limits.any:
        return Admission(limits)
    try:
        granted = await asyncio.wait_for(
            deps.ledger.reserve(trace_id, limits, wanted_tokens), LEDGER_SECONDS
        )
    except Exception as exc:
        log.warning("budget ledger unavailable, request forwarded unbudgeted: %r", exc)
        return Admission(limits)
    if isinstance(granted, Spent):
        error, violation = budgets.refusal(granted, limits)
        return Refused(error, violation, limits)
    tokens_used = 0
    if limits.max_tokens is not None and granted.tokens_left is not None:
        tokens_used = limits.max_tokens - granted.tokens_left
    admission = Admission(limits, granted)
    admission.headers = budgets.remaining_headers(limits, granted.steps_used, tokens_used)
    return admission


def settle(deps: Deps, admission: Admission, usage: Usage) -> None:
    """Swap the held tokens for the real usage, off the request's path, once.

    The write starts now; the trace's next reservation waits for it (see SettlementWrites).
    """
    reservation = admission.reservation
    if admission.settled or reservation is None or admission.limits.max_tokens is None:
        return  # only a token budget has anything to settle
    admission.settled = True
    known = usage.total_tokens is not None or usage.prompt_tokens is not None
    # Without a usage report (a cancelled stream) assume the held tokens were spent.
    used = usage.total() if known else reservation.tokens
    deps.ledger.settle_later(Settlement(reservation, used))
