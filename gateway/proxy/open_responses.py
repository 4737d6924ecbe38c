"""Background responses: a step whose request the provider answered before the response's end
stays open here, by response id, until a later exchange about it (a poll, a resumed stream, a
cancel) sees its end, which ends the step; those exchanges are no steps of their own.

The steps are held by this process only. A step still open when the gateway stops, or pushed
out by `LIMIT` newer ones, is recorded then with what its creation saw (stop `unknown`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from gateway.exchange.calls import CallRules
from gateway.exchange.closing import ends_response, left_open, unended
from gateway.exchange.machine import Outcome, Settle
from gateway.proxy.finisher import StepEnd
from gateway.proxy.relay import Timing

log = logging.getLogger(__name__)

# Open steps kept at most: each holds its step's start and what its creation saw.
LIMIT = 10_000


@dataclass(slots=True)
class OpenStep:
    end: StepEnd
    calls: CallRules | None  # the step's call rules, for the output its end brings
    seen: Outcome  # what the creating exchange saw
    timing: Timing  # the creating exchange's
    spent: Settle | None  # its settlement, held: a later one may still come


class OpenResponses:
    """The open steps of background responses, by response id."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._steps: OrderedDict[str, OpenStep] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._steps)

    def get(self, response_id: str) -> OpenStep | None:
        return self._steps.get(response_id)

    def open(self, response_id: str, step: OpenStep) -> None:
        self._steps[response_id] = step
        while len(self._steps) > self._limit:
            _, oldest = self._steps.popitem(last=False)
            _end_unseen(oldest)

    def end(self, response_id: str, outcome: Outcome, timing: Timing, spent: Settle | None) -> None:
        """The response ended: its step ends with this outcome, once (a second exchange that
        sees the end too, say a poll racing a cancel, finds nothing left to end)."""
        step = self._steps.pop(response_id, None)
        if step is None:
            return
        first = step.timing.first_chunk_at
        observed = step.timing.observe_seconds + timing.observe_seconds
        step.end.settle(spent or Settle(outcome.usage, outcome.billing, outcome.model))
        step.end.finished(outcome, Timing(first, observed))

    async def close(self) -> None:
        """The gateway stops: each step still open is recorded as far as it got."""
        if self._steps:
            log.info("%d background responses still open are recorded unended", len(self._steps))
        while self._steps:
            _end_unseen(self._steps.popitem(last=False)[1])


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
            self._responses.open(outcome.response_id, step)
            return
        if self._spent is not None:
            self._end.settle(self._spent)
        self._end.finished(outcome, timing)


class FollowUp:
    """The handler of an exchange about an open step's response: it ends the step when it
    sees the response's end, and is no step itself."""

    def __init__(self, response_id: str, step: OpenStep, responses: OpenResponses) -> None:
        self._id = response_id
        self._protocol = step.end.protocol
        self._responses = responses
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
            self._responses.end(self._id, outcome, timing, self._spent)
