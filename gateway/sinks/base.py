"""Where finished steps and refusals go besides the recorder: metrics, webhooks, ...

A sink is called on the event loop; it must be quick and must not raise (a raising sink is
logged and skipped, never breaking the request).
"""

from __future__ import annotations

import logging
from typing import Protocol

from gateway.step import RefusalRecord, StepRecord

log = logging.getLogger(__name__)


class Sink(Protocol):
    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        """Fires once per step, when its exchange has finished: after the step's record is
        spooled (it will be stored) and before the client's response is complete. The
        record is frozen and final."""

    def request_refused(self, refusal: RefusalRecord) -> None:
        """Fires once per refused request, after its record is spooled and before the
        refusal is sent."""


def notify_step(sinks: tuple[Sink, ...], step: StepRecord, overhead_seconds: float) -> None:
    for sink in sinks:
        try:
            sink.step_finished(step, overhead_seconds)
        except Exception:
            log.exception("sink %r failed on a step", sink)


def notify_refusal(sinks: tuple[Sink, ...], refusal: RefusalRecord) -> None:
    for sink in sinks:
        try:
            sink.request_refused(refusal)
        except Exception:
            log.exception("sink %r failed on a refusal", sink)
