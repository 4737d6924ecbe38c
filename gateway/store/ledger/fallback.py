"""Budgets that hold through a store outage: a local ledger beside the store's.

While the store answers it is the source of truth, and each answer is remembered per trace.
When it fails or is slow (no answer within `store_seconds`, the reservation's one timeout),
this replica enforces every budget from the counts it last read plus what it admitted since,
without waiting on the store again for `retry_seconds`; what it admitted meanwhile is added
to the store's counts once the store answers again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

from gateway.background import Background
from gateway.checks import budgets
from gateway.checks.budget_rule import Caps, refusing_budget
from gateway.checks.budgets import Limits, Reservation, Settlement, Spent
from gateway.store.ledger.core import Ledger

log = logging.getLogger(__name__)

STORE_SECONDS = 1.0  # a reservation the store has not answered by then is made locally
RETRY_SECONDS = 5.0  # how long the store is left alone after it failed
KNOWN_TRACES = 100_000


@dataclass(frozen=True, slots=True)
class LocalReservation(Reservation):
    """A reservation made while the store was unreachable."""


@dataclass(slots=True)
class _Count:
    steps: int = 0
    tokens: int = 0  # spent plus held in flight
    cost_nano: int = 0  # spent plus held in flight
    started_at: float | None = None  # epoch seconds of the trace's first request


def _succeeded(task: asyncio.Task[Any]) -> bool:
    return not task.cancelled() and task.exception() is None


def _left(deadline: float) -> float:
    """Seconds from now to `deadline` (loop time), never negative."""
    return max(0.0, deadline - asyncio.get_running_loop().time())


class FallbackLedger:
    """Wraps the store's ledger; same interface."""

    def __init__(
        self,
        store: Ledger,
        owner: Background,
        *,
        store_seconds: float = STORE_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._owner = owner
        self._store_seconds = store_seconds
        self.retry_seconds = retry_seconds
        self._clock = clock
        self._known: OrderedDict[str, _Count] = OrderedDict()
        self._unsent: dict[str, _Count] = {}  # admitted locally, not yet in the store
        self._unsent_settlements: list[Settlement] = []
        self._down_until: float | None = None
        self._probing = False
        self._background: set[asyncio.Task[None]] = set()

    @property
    def degraded(self) -> bool:
        """True while budgets are enforced from local counts."""
        return self._down_until is not None

    async def reserve(
        self,
        trace_id: str,
        limits: Limits,
        wanted_tokens: int | None,
        output_price: Decimal | None = None,
    ) -> Reservation | Spent:
        if self._down_until is not None and (self._probing or self._clock() < self._down_until):
            return self._reserve_locally(trace_id, limits, wanted_tokens, output_price)
        # The reservation's one timeout: the store's whole part (adding what was admitted
        # locally, then reserving) within `store_seconds`, else the reservation is made locally.
        deadline = asyncio.get_running_loop().time() + self._store_seconds
        try:
            if self._down_until is not None:
                self._probing = True
                await self._send_unsent(deadline)
            reserving = self._store.reserve(trace_id, limits, wanted_tokens, output_price)
            granted = await self._reserve_in_store(trace_id, reserving, deadline)
        except Exception as exc:
            self._went_down(exc)
            return self._reserve_locally(trace_id, limits, wanted_tokens, output_price)
        finally:
            self._probing = False
        if self._down_until is not None:
            log.warning("budget ledger: the store answers again; local counts were added to it")
            self._down_until = None
        self._learn(trace_id, limits, granted)
        return granted

    async def _reserve_in_store(
        self,
        trace_id: str,
        reserving: Coroutine[Any, Any, Reservation | Spent],
        deadline: float,
    ) -> Reservation | Spent:
        """The store's reservation by `deadline` (loop time). One that takes longer is not
        cancelled (a thread cannot be, and a sent statement may still commit): if the
        store makes it after all, the step (also counted locally) is taken back out."""
        task = self._owner.task("budget-reserve", reserving, finish=True, awaited=True)
        try:
            return await asyncio.wait_for(asyncio.shield(task), _left(deadline))
        except TimeoutError:
            task.add_done_callback(partial(self._late_reservation, trace_id))
            raise

    def _late_reservation(self, trace_id: str, task: asyncio.Task[Reservation | Spent]) -> None:
        if not _succeeded(task):
            return
        granted = task.result()
        if not isinstance(granted, Reservation):
            return
        release = Settlement(granted, 0)
        if self._down_until is None:
            self._spawn(self._store.add(trace_id, -1, 0))
            self._store.settle_later(release)
        else:
            self._unsent.setdefault(trace_id, _Count()).steps -= 1
            self._unsent_settlements.append(release)

    async def _in_time(
        self, write: Coroutine[Any, Any, None], resend: Callable[[], None], deadline: float | None
    ) -> None:
        """A store write by `deadline` (loop time; None: within `store_seconds`), else raise.
        A write that failed is queued again; one still under way is queued again only if it
        fails in the end."""
        task = self._owner.task("budget-write", write, finish=True, awaited=True)
        seconds = self._store_seconds if deadline is None else _left(deadline)
        try:
            await asyncio.wait_for(asyncio.shield(task), seconds)
        except TimeoutError:
            task.add_done_callback(lambda done: None if _succeeded(done) else resend())
            raise
        except Exception:
            resend()
            raise

    def settle_later(self, settlement: Settlement) -> None:
        reservation = settlement.reservation
        count = self._known.get(reservation.trace_id)
        if count is not None:
            count.steps -= settlement.steps_back
            count.tokens += settlement.used_tokens - reservation.tokens
            count.cost_nano += settlement.used_cost_nano - reservation.cost_held_nano
        if isinstance(reservation, LocalReservation):
            trace_id, tokens, cost = (
                reservation.trace_id,
                settlement.used_tokens,
                settlement.used_cost_nano,
            )
            steps = -settlement.steps_back
            if self._down_until is None:
                self._spawn(self._store.add(trace_id, steps, tokens, cost))
            else:
                unsent = self._unsent.setdefault(trace_id, _Count())
                unsent.steps += steps
                unsent.tokens += tokens
                unsent.cost_nano += cost
        elif self._down_until is None:
            self._store.settle_later(settlement)
        else:
            self._unsent_settlements.append(settlement)

    async def settle(self, settlement: Settlement) -> None:
        await self._store.settle(settlement)

    async def add(self, trace_id: str, steps: int, tokens: int, cost_nano: int = 0) -> None:
        await self._store.add(trace_id, steps, tokens, cost_nano)

    async def close(self) -> None:
        if self._unsent or self._unsent_settlements:
            try:  # one last chance for what this replica admitted while the store was away
                await self._send_unsent()
            except Exception as exc:
                log.warning("budget ledger: local counts not added to the store: %r", exc)
        if self._background:
            await asyncio.wait(list(self._background), timeout=5)
        await self._store.close()

    def _reserve_locally(
        self,
        trace_id: str,
        limits: Limits,
        wanted_tokens: int | None,
        output_price: Decimal | None,
    ) -> Reservation | Spent:
        """The store's reservation rule (see ledger.RESERVE) over what this replica knows."""
        count = self._count(trace_id)
        now = time.time()
        if count.started_at is None:
            count.started_at = now
        spent = self._spent_locally(count, limits, output_price, now)
        if spent is not None:
            return spent
        held = 0
        if limits.max_tokens is not None:
            left = limits.max_tokens - count.tokens
            held = left if wanted_tokens is None else min(wanted_tokens, left)
        cap = limits.max_cost_nano
        cost_held = 0
        if cap is not None:
            wanted = budgets.cost_wanted_nano(limits, wanted_tokens, output_price)
            cost_held = (
                cap - count.cost_nano if wanted is None else min(wanted, cap - count.cost_nano)
            )
        count.steps += 1
        count.tokens += held
        count.cost_nano += cost_held
        self._unsent.setdefault(trace_id, _Count()).steps += 1
        clamp = budgets.tightest(
            None if limits.max_tokens is None else held,
            None if cap is None else budgets.cost_clamp(cost_held, output_price),
        )
        return LocalReservation(
            trace_id,
            held,
            count.steps,
            None if limits.max_tokens is None else limits.max_tokens - count.tokens,
            clamp,
            cost_held_nano=cost_held,
            cost_left_nano=None if cap is None else cap - count.cost_nano,
            trace_started_at=count.started_at,
        )

    @staticmethod
    def _spent_locally(
        count: _Count, limits: Limits, output_price: Decimal | None, now: float
    ) -> Spent | None:
        def spent(budget: str) -> Spent:
            elapsed = 0.0 if count.started_at is None else now - count.started_at
            return Spent(budget, count.steps, count.tokens, count.cost_nano, elapsed)

        elapsed = 0.0 if count.started_at is None else now - count.started_at
        caps = Caps.of(limits, output_price)
        budget = refusing_budget(caps, count.steps, count.tokens, count.cost_nano, elapsed)
        return None if budget is None else spent(budget)

    def _learn(self, trace_id: str, limits: Limits, granted: Reservation | Spent) -> None:
        count = self._count(trace_id)
        count.steps = granted.steps_used
        if isinstance(granted, Spent):
            count.tokens = granted.tokens_used
            count.cost_nano = granted.cost_used_nano
            return
        if limits.max_tokens is not None and granted.tokens_left is not None:
            count.tokens = limits.max_tokens - granted.tokens_left
        cap = limits.max_cost_nano
        if cap is not None and granted.cost_left_nano is not None:
            count.cost_nano = cap - granted.cost_left_nano
        if granted.trace_started_at is not None:
            count.started_at = granted.trace_started_at

    def _count(self, trace_id: str) -> _Count:
        count = self._known.get(trace_id)
        if count is None:
            count = self._known[trace_id] = _Count()
            if len(self._known) > KNOWN_TRACES:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(trace_id)
        return count

    async def _send_unsent(self, deadline: float | None = None) -> None:
        """Add what was admitted locally to the store, before it decides again: all by
        `deadline` (loop time), or each write within `store_seconds` (None)."""
        while self._unsent:
            trace_id, count = self._unsent.popitem()
            resend = partial(self._resend_add, trace_id, count)
            adding = self._store.add(trace_id, count.steps, count.tokens, count.cost_nano)
            await self._in_time(adding, resend, deadline)
        while self._unsent_settlements:
            settlement = self._unsent_settlements.pop()
            resend = partial(self._resend_settlement, settlement)
            await self._in_time(self._store.settle(settlement), resend, deadline)

    def _resend_add(self, trace_id: str, count: _Count) -> None:
        merged = self._unsent.setdefault(trace_id, _Count())
        merged.steps += count.steps
        merged.tokens += count.tokens
        merged.cost_nano += count.cost_nano

    def _resend_settlement(self, settlement: Settlement) -> None:
        self._unsent_settlements.append(settlement)

    def _went_down(self, exc: BaseException) -> None:
        log.debug("budget ledger: the store failed: %r", exc)
        if self._down_until is None:
            log.warning(
                "budget ledger: the store does not answer (%r); enforcing budgets from "
                "this replica's counts until it does",
                exc,
            )
        self._down_until = self._clock() + self.retry_seconds

    def _spawn(self, write: Coroutine[Any, Any, None]) -> None:
        async def run() -> None:
            try:
                await write
            except Exception as exc:
                log.warning("budget ledger: adding a local settlement failed: %r", exc)

        task = self._owner.task("budget-add", run(), finish=True)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
