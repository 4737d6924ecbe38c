"""Budget admission: reserve a step (and tokens) in the ledger before the provider is called,
as `gateway.checks.admission.decide` says. What was reserved is settled or given back at
the step's end (gateway.exchange.closing decides, gateway.proxy.finisher writes).

The ledger keeps enforcing from local counts while the store does not answer
(store/ledger/fallback.py); only if the ledger itself fails is a request let through
unbudgeted (logged, counted). With no budget configured the ledger is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.checks import budgets
from gateway.checks.admission import Admit, Answer, Refuse, Reserve, Unavailable, decide
from gateway.checks.budgets import Limits, Reservation
from gateway.config import KeyBudget
from gateway.exchange.closing import Budget
from gateway.proxy.deps import Deps

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Admission:
    limits: Limits
    reservation: Reservation | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def clamp(self) -> int | None:
        return None if self.reservation is None else self.reservation.clamp

    @property
    def budget(self) -> Budget:
        """What the step's end settles or gives back."""
        return Budget(self.limits, self.reservation)


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


def _count_unbudgeted(deps: Deps) -> None:
    deps.sinks.request_unbudgeted()
