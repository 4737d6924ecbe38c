"""The gateway's one hook system: sinks observe what happened, through the events below.

A sink implements `step_finished` and `request_refused`, and any of the other events it
needs (one it lacks is not called). `Sinks` fans each event out, on the event loop: a sink
must be quick and must not raise (a raising sink is logged and skipped, never breaking the
request). Records reach sinks as the recorder gets them, before redaction: the exporters
that carry text sit behind `sinks.redacted.Redacting`, which hands them each record redacted
once, in its own thread (see README, "The step's end").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from gateway.mcp.records import Execution, McpViolation
from gateway.step import RefusalRecord, StepRecord

log = logging.getLogger(__name__)


class Sink(Protocol):
    """The events every sink observes."""

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        """Fires once per step, when its exchange has finished: after the step's record is
        spooled (it will be stored) and before the client's response is complete. The
        record is frozen and final."""

    def request_refused(self, refusal: RefusalRecord) -> None:
        """Fires once per refused request, after its record is spooled and before the
        refusal is sent."""


class Events(Protocol):
    """The events a sink may observe besides `Sink`'s, each when stated."""

    def relay_started(self, protocol: str) -> None:
        """Fires once per response relayed, when the provider's head has arrived and before
        the first byte is relayed; `relay_ended` always follows, however the relay ends."""

    def relay_ended(self, protocol: str) -> None:
        """Fires once per `relay_started`, when the relay has ended (the step's
        `step_finished` has fired by then)."""

    def request_unbudgeted(self) -> None:
        """Fires when a request budgets apply to is forwarded unbudgeted (the ledger failed),
        before it is sent upstream."""

    def exchange_anomalies(self, step: StepRecord, kinds: tuple[str, ...]) -> None:
        """Fires once per step whose exchange noted illegal transitions, right after its
        `step_finished`; `kinds` holds one entry per anomaly."""

    def mcp_execution(self, execution: Execution, declared: bool) -> None:
        """Fires once per MCP tool call answered (or refused), after its records are
        spooled; `declared` says the server's tool list names its tool."""

    def mcp_violation(self, violation: McpViolation) -> None:
        """Fires once per violation found on the MCP side, after it is spooled (never for
        one withdrawn, nor for one stored again with its run)."""

    def subagent_linked(self, via: str) -> None:
        """Fires once per run linked to a parent run (a sub-agent) by this process, when its
        first request is admitted; `via` is how: header, traceparent or content."""


EVENTS: tuple[str, ...] = ("step_finished", "request_refused", "relay_started", "relay_ended")
EVENTS += ("request_unbudgeted", "exchange_anomalies", "mcp_execution", "mcp_violation")
EVENTS += ("subagent_linked",)


class Sinks:
    """The sinks, each event's hooks found once: an event no sink observes costs a loop
    over an empty tuple."""

    __slots__ = ("_hooks", "_sinks")

    def __init__(self, sinks: Iterable[object] = ()) -> None:
        self._sinks = tuple(sinks)
        self._hooks: dict[str, tuple[Callable[..., None], ...]] = {
            name: tuple(h for s in self._sinks if (h := getattr(s, name, None)) is not None)
            for name in EVENTS
        }

    def __iter__(self) -> Iterator[object]:
        return iter(self._sinks)

    def joined(self, *sinks: object) -> Sinks:
        return Sinks((*self._sinks, *sinks))

    def _fire(self, name: str, *args: Any) -> None:
        for hook in self._hooks[name]:
            try:
                hook(*args)
            except Exception:
                log.exception("sink %r failed on %s", getattr(hook, "__self__", hook), name)

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        self._fire("step_finished", step, overhead_seconds)

    def request_refused(self, refusal: RefusalRecord) -> None:
        self._fire("request_refused", refusal)

    def relay_started(self, protocol: str) -> None:
        self._fire("relay_started", protocol)

    def relay_ended(self, protocol: str) -> None:
        self._fire("relay_ended", protocol)

    def request_unbudgeted(self) -> None:
        self._fire("request_unbudgeted")

    def exchange_anomalies(self, step: StepRecord, kinds: tuple[str, ...]) -> None:
        self._fire("exchange_anomalies", step, kinds)

    def mcp_execution(self, execution: Execution, declared: bool) -> None:
        self._fire("mcp_execution", execution, declared)

    def mcp_violation(self, violation: McpViolation) -> None:
        self._fire("mcp_violation", violation)

    def subagent_linked(self, via: str) -> None:
        self._fire("subagent_linked", via)
