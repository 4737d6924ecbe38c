"""Budget admission: reserve a step (and tokens) in the ledger before the provider is called,
as `gateway.checks.admission.decide` says; settle or give back what was reserved after.

The ledger keeps enforcing from local counts while the store does not answer
(store/ledger/fallback.py); only if the ledger itself fails is a request let through
unbudgeted (logged, counted). With no budget configured the ledger is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gateway.checks import budgets
from gateway.checks.admission import Admit, Answer, Refuse, Reserve, Unavailable, decide
from gateway.checks.budgets import Limits, Reservation, Settlement
from gateway.config import KeyBudget
from gateway.items import Usage
from gateway.proxy.deps import Deps
from gateway.runs.pricing import Cost

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Admission:
    limits: Limits
    reservation: Reservation | None = None
    headers: dict[str, str] = field(default_factory=dict)
    settled: bool = False
    charged: tuple[int, int] = (0, 0)  # tokens and nano-dollars its settlement counted spent

    @property
    def clamp(self) -> int | None:
        return None if self.reservation is None else self.reservation.clamp


async def admit(
    deps: Deps,
    headers: Mapping[str, str],
    key: KeyBudget | None,
    trace_id: str,
    wanted_tokens: int | None,
    model: str | None = None,
    upstream_url: str | None = None,
) -> Admission | Refuse:
    """Decide, ask the ledger if the decision says so, decide from its answer."""
    limits = budgets.limits_for(deps.settings, key, headers)
    if not limits.any:  # admitted untouched (`decide` would say so)
        return Admission(limits)
    decision: Admit | Reserve | Refuse = decide(limits, trace_id, wanted_tokens)
    if isinstance(decision, Reserve):
        answer = await _reserve(deps, decision, model, upstream_url)
        decision = decide(limits, trace_id, wanted_tokens, answer)
    if isinstance(decision, Refuse):
        return decision
    if decision.unbudgeted:
        _count_unbudgeted(deps)
    return Admission(decision.limits, decision.reservation, dict(decision.headers))


async def _reserve(
    deps: Deps, reserve: Reserve, model: str | None, upstream_url: str | None
) -> Answer:
    """The ledger's answer. The ledger bounds its own wait on the store (and answers from
    local counts past it); only a ledger that fails outright leaves the request unbudgeted."""
    price = None
    if reserve.priced:
        price = deps.pricer.output_price(model, upstream_url=upstream_url)
    try:
        return await deps.ledger.reserve(
            reserve.trace_id, reserve.limits, reserve.wanted_tokens, price
        )
    except Exception as exc:
        log.warning("budget ledger unavailable, request forwarded unbudgeted: %r", exc)
        return Unavailable()


def settle(deps: Deps, admission: Admission, usage: Usage, cost: Cost | None = None) -> None:
    """Swap the held tokens and dollars for the real usage and cost, off the request's path,
    once. The write starts now; the trace's next reservation waits for it (SettlementWrites).
    """
    reservation, limits = admission.reservation, admission.limits
    if admission.settled or reservation is None:
        return
    if limits.max_tokens is None and limits.max_cost_usd is None:
        return  # only token and cost budgets have anything to settle
    admission.settled = True
    known = usage.total_tokens is not None or usage.prompt_tokens is not None
    # Without a usage report (a cancelled stream) assume the held tokens were spent.
    used = usage.total() if known else reservation.tokens
    used_cost = budgets.cost_used_nano(
        None if cost is None else cost.usd, reservation.cost_held_nano, known
    )
    admission.charged = (used, used_cost)
    deps.ledger.settle_later(Settlement(reservation, used, used_cost))


def give_back(deps: Deps, admission: Admission, *, step: bool = True) -> None:
    """A failed attempt (an error status, an unreachable provider: no answer) takes nothing
    from the run's budgets: its step and what its settlement counted are given back. A
    request its client gave up on before the answer (`step` False) was the provider's to
    work on: its step counts, its unknown usage is given back."""
    reservation = admission.reservation
    if reservation is None:
        return
    tokens, cost = admission.charged
    if not step and tokens == 0 and cost == 0:
        return  # nothing was counted: nothing to give back
    nothing_held = replace(reservation, tokens=0, cost_held_nano=0)
    deps.ledger.settle_later(Settlement(nothing_held, -tokens, -cost, steps_back=int(step)))


def _count_unbudgeted(deps: Deps) -> None:
    if deps.metrics is not None:
        deps.metrics.instruments.unbudgeted.inc()
