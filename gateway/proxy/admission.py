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
from gateway.checks.budgets import Limits, Reservation, Settlement
from gateway.config import KeyBudget
from gateway.exchange.closing import Budget
from gateway.proxy.deps import Deps
from gateway.step import Lineage

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Admission:
    limits: Limits
    reservation: Reservation | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # The budget of the run's whole tree, held on its root's ledger row (a sub-agent's).
    tree: Budget | None = None

    @property
    def clamp(self) -> int | None:
        own = None if self.reservation is None else self.reservation.clamp
        tree = self.tree.reservation if self.tree is not None else None
        return budgets.tightest(own, None if tree is None else tree.clamp)

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
    lineage: Lineage | None = None,
) -> Admission | Refuse:
    """The run's budgets, and a sub-agent's tree's: the tree's step is taken first, and
    given back when the run's own budget refuses."""
    limits = budgets.limits_for(deps.settings, key, headers)
    asked = (wanted_tokens, model, upstream_url)
    if lineage is None:
        if limits.any and (deps.settings.tree_budgets or budgets.sets_budget(headers)):
            deps.tree_limits.put(trace_id, limits)  # its sub-agents are held to it
        return await _admit(deps, limits, trace_id, asked)
    root = lineage.root_trace_id
    tree_limits = budgets.tree_limits(deps.settings, deps.tree_limits.get(root))
    tree: Admission | None = None
    if tree_limits is not None:
        held = await _admit(deps, tree_limits, root, asked)
        if isinstance(held, Refuse):
            return held
        tree = held
    admission = await _admit(deps, limits, trace_id, asked)
    if tree is None:
        return admission
    if isinstance(admission, Refuse):
        if tree.reservation is not None:  # the tree's step was not taken after all
            deps.ledger.settle_later(Settlement(tree.reservation, 0, 0, steps_back=1))
        return admission
    admission.tree = tree.budget
    admission.headers = {**tree.headers, **admission.headers}
    return admission


async def _admit(
    deps: Deps, limits: Limits, trace_id: str, asked: tuple[int | None, str | None, str | None]
) -> Admission | Refuse:
    """Decide, ask the ledger if the decision says so, decide from its answer."""
    wanted_tokens, model, upstream_url = asked
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
