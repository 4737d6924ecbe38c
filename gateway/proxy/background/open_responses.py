"""Background responses: a step whose request the provider answered before the response's end
stays open, by response id, until a later exchange about it (a poll, a resumed stream, a
cancel) sees its end, which ends the step; those exchanges are no steps of their own.

An open step is held here and written to the store (gateway.proxy.background.shared), so the
exchange that sees the end ends it whichever gateway on the store runs it: here from what
this process holds, elsewhere from the stored row. Ending takes the row first; of exchanges
racing to end one step, one gets it and records the step, once. A step this process still
holds when the gateway stops, or pushes out by `LIMIT` newer ones, is recorded then with
what its creation saw (stop `unknown`), its budget settled: unless another gateway ended it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from gateway.background import Background
from gateway.exchange.calls import CallRules
from gateway.exchange.closing import Opened, ends_response, left_open, unended
from gateway.exchange.machine import Outcome, Settle
from gateway.proxy.background.shared import SharedSteps
from gateway.proxy.finisher import StepEnd
from gateway.proxy.relay import Timing

log = logging.getLogger(__name__)

# Open steps kept in memory at most: each holds its step's start and what its creation saw.
LIMIT = 10_000

Ending = Callable[[str, Outcome, Timing, Settle | None], None]  # response id, its end


@dataclass(slots=True)
class OpenStep:
    end: StepEnd
    calls: CallRules | None  # the step's call rules, for the output its end brings
    seen: Outcome  # what the creating exchange saw
    timing: Timing  # the creating exchange's
    spent: Settle | None  # its settlement, held: a later one may still come


class OpenResponses:
    """The open steps of background responses, by response id: those this process opened in
    memory, every gateway's in the store once `sharing` (the app wires it so)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._steps: OrderedDict[str, OpenStep] = OrderedDict()
        self._shared: SharedSteps | None = None  # until `sharing`: this process alone
        self._work: Background | None = None
        self._limit = limit
        self._writes: dict[str, asyncio.Task[None]] = {}  # rows being opened, by response id
        self._pending: set[asyncio.Task[Any]] = set()
        self._unshared: set[str] = set()  # held steps whose row the store never got

    def sharing(
        self, shared: SharedSteps, owner: Background
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """From now on the open steps are shared through the store, their writes and ends
        started by a child of `owner`: the close returned, adopted after it, runs first."""
        self._shared = shared
        self._work = owner.child("open responses work")
        return self.close

    def __len__(self) -> int:
        return len(self._steps)

    def get(self, response_id: str) -> OpenStep | None:
        return self._steps.get(response_id)

    async def find(self, response_id: str) -> Opened | None:
        """A step open in the store that this process does not hold (another gateway's)."""
        if self._shared is None:
            return None
        try:
            return await self._shared.find(response_id)
        except Exception:
            log.exception("reading the open background response %s failed", response_id)
            return None

    def open(self, response_id: str, step: OpenStep, opened: Opened) -> None:
        self._steps[response_id] = step
        if self._shared is not None:
            write = self._put(response_id, opened)
            self._writes[response_id] = self._start("open background response", write)
        while len(self._steps) > self._limit:
            oldest_id, oldest = self._steps.popitem(last=False)
            if self._shared is None:
                _end_unseen(oldest)
            else:  # unless another gateway on the store ended it meanwhile
                ending = self._end_if_ours(oldest_id, partial(_end_unseen, oldest))
                self._start("end background response unseen", ending)

    def end(self, response_id: str, outcome: Outcome, timing: Timing, spent: Settle | None) -> None:
        """The response ended: its step ends with this outcome, once (a second exchange that
        sees the end too, say a poll racing a cancel, here or elsewhere, finds nothing)."""
        step = self._steps.pop(response_id, None)
        if step is None:
            return
        if self._shared is None:
            _end_held(step, outcome, timing, spent)
            return
        ending = self._end_if_ours(response_id, partial(_end_held, step, outcome, timing, spent))
        self._start("end background response", ending)

    def end_stored(self, ends: Callable[[Opened, Outcome, Timing], None]) -> Ending:
        """The ending of a step found in the store: taken from it, then ended by `ends`."""

        async def ending(response_id: str, outcome: Outcome, timing: Timing) -> None:
            taken = await self._take(response_id)
            if taken is not None:
                ends(taken, outcome, timing)

        def end(response_id: str, outcome: Outcome, timing: Timing, _: Settle | None) -> None:
            self._steps.pop(response_id, None)
            self._start("end background response", ending(response_id, outcome, timing))

        return end

    async def _put(self, response_id: str, opened: Opened) -> None:
        assert self._shared is not None
        try:
            await self._shared.put(response_id, opened)
        except Exception:
            log.exception("storing the open background response %s failed", response_id)
            self._unshared.add(response_id)  # this process alone can end its step

    async def _take(self, response_id: str) -> Opened | None:
        """The step's row, taken from the store: None when another exchange took it."""
        assert self._shared is not None
        opening = self._writes.get(response_id)
        if opening is not None:
            await asyncio.wait([opening])  # its row must be there to be taken
        try:
            return await self._shared.take(response_id)
        except Exception:
            log.exception("taking the open background response %s failed", response_id)
            return None

    async def _end_if_ours(self, response_id: str, end: Callable[[], None]) -> None:
        """A step held here ends here if this exchange took its row, or if its row never
        reached the store (no other gateway can end it then)."""
        taken = await self._take(response_id)
        unshared = response_id in self._unshared
        self._unshared.discard(response_id)
        if taken is not None or unshared:
            end()

    def _start(self, name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        assert self._work is not None, "only shared steps are ended off the exchange"
        task = self._work.task(name, coro, finish=True)
        self._pending.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        for response_id, write in list(self._writes.items()):
            if write is task:
                del self._writes[response_id]

    async def settled(self) -> None:
        """Every row write and step end started so far has finished."""
        while self._pending:
            await asyncio.wait(list(self._pending))

    async def close(self) -> None:
        """The gateway stops: each step this process still holds is recorded as far as it
        got, unless another gateway on the store ended it meanwhile."""
        await self.settled()
        if self._steps:
            log.info("%d background responses still open are recorded unended", len(self._steps))
        while self._steps:
            response_id, step = self._steps.popitem(last=False)
            if self._shared is None:
                _end_unseen(step)
            else:
                await self._end_if_ours(response_id, partial(_end_unseen, step))


def _end_held(step: OpenStep, outcome: Outcome, timing: Timing, spent: Settle | None) -> None:
    first = step.timing.first_chunk_at
    observed = step.timing.observe_seconds + timing.observe_seconds
    step.end.settle(spent or Settle(outcome.usage, outcome.billing, outcome.model))
    step.end.finished(outcome, Timing(first, observed))


def _end_unseen(step: OpenStep) -> None:
    if step.spent is not None:
        step.end.settle(step.spent)
    step.end.finished(unended(step.seen), step.timing)


class Creating:
    """The handler of a background request's exchange: the step ends now if the answer is
    the response's end, else it stays open in `responses`."""

    def __init__(self, end: StepEnd, calls: CallRules | None, responses: OpenResponses) -> None:
        self._end = end
        self._calls = calls
        self._responses = responses
        self._spent: Settle | None = None

    @property
    def protocol(self) -> str:
        return self._end.protocol

    def upstream_answered(self, provider_request_id: str | None) -> None:
        self._end.upstream_answered(provider_request_id)

    def settle(self, spent: Settle) -> None:
        self._spent = spent  # decided with the outcome that follows at once

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        if outcome.response_id is not None and left_open(outcome):
            step = OpenStep(self._end, self._calls, outcome, timing, self._spent)
            self._responses.open(outcome.response_id, step, self._end.opened(outcome, timing))
            return
        if self._spent is not None:
            self._end.settle(self._spent)
        self._end.finished(outcome, timing)


class FollowUp:
    """The handler of an exchange about an open step's response: it ends the step when it
    sees the response's end, and is no step itself."""

    def __init__(self, response_id: str, protocol: str, ending: Ending) -> None:
        self._id = response_id
        self._protocol = protocol
        self._ending = ending
        self._spent: Settle | None = None

    @property
    def protocol(self) -> str:
        return self._protocol

    def upstream_answered(self, provider_request_id: str | None) -> None:
        """The step keeps its creating request's id."""

    def settle(self, spent: Settle) -> None:
        self._spent = spent

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        if ends_response(outcome):
            self._ending(self._id, outcome, timing, self._spent)
