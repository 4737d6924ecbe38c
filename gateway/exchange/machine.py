"""The exchange: one proxied response as a sans-IO state machine.

The relay feeds it events (response head, chunk received, body ended, client gone, provider
broke, timeout, provider unreachable; over a WebSocket, frames) and executes the commands it
returns, in order:
forward bytes, settle usage, finished with an outcome, end or abort the client's response,
close the upstream. Nothing polls it and it calls nobody back. Its outcome holds every
decision of the step: the stop and stream violations (`gateway.exchange.stops.RULES`), the
output checks, the tool and loop checks (`gateway.exchange.calls`), and the anomalies noted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from gateway.exchange.calls import CallRules
from gateway.exchange.frames import FrameTap
from gateway.exchange.stops import Ending, Seen, decide, decided
from gateway.exchange.tap import ResponseTap
from gateway.items import NO_BILLING, Billing, Item, StopReason, Usage, Violation
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.frames import FrameDecoder, ServerFrame


class AnomalyKind(Enum):
    EVENT = "event"  # an I/O event the exchange's phase does not allow: the caller's bug
    DELTA = "delta"  # a delta the assembler's state does not allow: an odd provider stream


@dataclass(frozen=True, slots=True)
class Anomaly:
    """An illegal transition, noted and ignored (never raised)."""

    kind: AnomalyKind
    detail: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the exchange ended and what the response said: everything a step record needs
    from the provider's side. Built once, when the exchange finishes, and read-only (its
    lists become tuples, its error a read-only mapping)."""

    ending: Ending
    stop_reason: StopReason
    http_status: int | None = None
    raw_stop_reason: str | None = None
    output_items: tuple[Item, ...] = ()
    usage: Usage = field(default_factory=Usage)
    response_id: str | None = None
    model: str | None = None
    error: Mapping[str, Any] | None = None
    violations: tuple[Violation, ...] = ()
    complete: bool = False  # the protocol's completion marker arrived
    anomalies: tuple[Anomaly, ...] = ()  # noted until the outcome was decided
    billing: Billing = NO_BILLING  # what else the provider billed
    refusal_category: str | None = None  # the provider's category of a refusal
    pending: bool = False  # the provider said it is still working on the response

    def __post_init__(self) -> None:
        if type(self.error) is dict:
            object.__setattr__(self, "error", MappingProxyType(self.error))

    @property
    def continuable(self) -> bool:
        """A later request may continue this step (it produced an answer)."""
        return self.stop_reason.answered

    @property
    def no_answer(self) -> bool:
        """The provider gave no answer at all: an error status, it could not be reached, or
        the client left before the response's head (`left_waiting`)."""
        failed = self.ending is Ending.UNREACHABLE or (self.http_status or 0) >= 400
        return failed or self.left_waiting

    @property
    def left_waiting(self) -> bool:
        """The client left before the response's head: the provider had the request and
        may have worked on it; what it used is unknown."""
        return self.ending is Ending.CLIENT_GONE and self.http_status is None


@dataclass(frozen=True, slots=True)
class Forward:
    """Write these bytes to the client; with `observe`, then feed them back (`forwarded`):
    the client gets each chunk before it is parsed."""

    data: bytes
    observe: bool = False


@dataclass(frozen=True, slots=True)
class Settle:
    """The step's usage is final: swap the tokens and dollars held for it (fires once per
    exchange). Priced as the record will be: the answering model, what else was billed."""

    usage: Usage
    billing: Billing = NO_BILLING
    model: str | None = None  # the model the response named (None: the requested one)


@dataclass(frozen=True, slots=True)
class Finished:
    """The outcome is decided. Comes before the client's response is complete (EndResponse,
    or the last bytes of a body of known length), so a record made of it can be kept first."""

    outcome: Outcome


@dataclass(frozen=True, slots=True)
class EndResponse:
    """Complete the client's response."""


@dataclass(frozen=True, slots=True)
class AbortClient:
    """End the client's connection abruptly, so it sees an incomplete body."""


@dataclass(frozen=True, slots=True)
class CloseUpstream:
    """Stop the provider's work: nobody reads its answer any more."""


Command = Forward | Settle | Finished | EndResponse | AbortClient | CloseUpstream


class Phase(Enum):
    # Members are singletons: identity hashing, in C, for the transition tables.
    __hash__ = object.__hash__

    WAITING = "waiting"  # request sent, no response head yet
    RECEIVING = "receiving"  # body arriving
    MARKED = "marked"  # the completion marker arrived; the body may still be open
    DONE = "done"  # finished; nothing more is decided


class Event(Enum):
    # Members are singletons: identity hashing, in C, for the transition tables.
    __hash__ = object.__hash__

    HEAD = "head"
    CHUNK = "chunk"
    MARKER = "marker"  # internal: the tap saw the completion marker
    BODY_END = "body_end"
    CLIENT_GONE = "client_gone"
    PROVIDER_BROKE = "provider_broke"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"


_OPEN = (Phase.RECEIVING, Phase.MARKED)
_ENDINGS = {
    Event.BODY_END: Ending.BODY_ENDED,
    Event.CLIENT_GONE: Ending.CLIENT_GONE,
    Event.PROVIDER_BROKE: Ending.PROVIDER_BROKE,
    Event.TIMEOUT: Ending.TIMEOUT,
}
# (phase, event) → next phase: the only code that changes the phase. A missing pair is an
# illegal event, noted in `anomalies` (and in the outcome, when that comes later) and
# ignored. The end of a body of known length is seen before the transport's end of body,
# which then arrives in DONE and changes nothing.
TRANSITIONS: dict[tuple[Phase, Event], Phase] = {
    (Phase.WAITING, Event.HEAD): Phase.RECEIVING,
    (Phase.WAITING, Event.UNREACHABLE): Phase.DONE,
    (Phase.WAITING, Event.CLIENT_GONE): Phase.DONE,  # gone before the response's head
    (Phase.RECEIVING, Event.CHUNK): Phase.RECEIVING,
    (Phase.MARKED, Event.CHUNK): Phase.MARKED,
    (Phase.RECEIVING, Event.MARKER): Phase.MARKED,
    (Phase.MARKED, Event.MARKER): Phase.MARKED,
    **{(p, e): Phase.DONE for p in _OPEN for e in _ENDINGS},
    **{(Phase.DONE, e): Phase.DONE for e in _ENDINGS},
}


class Exchange:
    """One response. `adapter` None observes nothing (passthrough): bytes pass, one outcome.
    `calls` judges the step's tool calls; None leaves them unjudged. `frames` reads the
    events of a response over a WebSocket (fed by `frame`, not by bytes)."""

    def __init__(
        self,
        adapter: ProtocolAdapter | None,
        *,
        hide_usage_event: bool = False,
        calls: CallRules | None = None,
        frames: FrameDecoder | None = None,
    ):
        self._adapter = adapter
        self._hide = hide_usage_event
        self._calls = calls
        self._frames = frames
        self.phase = Phase.WAITING
        self.anomalies: list[str] = []
        self._tap: ResponseTap | None = None
        self._frame_tap: FrameTap | None = None
        self._status: int | None = None
        self._settled = False

    def _go(self, event: Event) -> bool:
        following = TRANSITIONS.get((self.phase, event))
        if following is None:
            self.anomalies.append(f"{event.value} in phase {self.phase.value}")
            return False
        before, self.phase = self.phase, following
        return before is not Phase.DONE

    @property
    def holds_back(self) -> bool:
        """Bytes are released per event (one event is hidden), not chunk by chunk."""
        return self._tap is not None and self._tap.holds_back

    def head(
        self,
        status: int,
        *,
        content_type: str | None,
        content_encoding: str | None,
        content_length: int | None,
    ) -> list[Command]:
        """The provider's status and headers arrived."""
        if not self._go(Event.HEAD):
            return []
        self._status = status
        if self._adapter is not None:
            self._tap = ResponseTap(
                self._adapter,
                status=status,
                is_sse=content_type == "text/event-stream",
                content_encoding=content_encoding,
                hide_usage_event=self._hide,
                content_length=content_length,
            )
        return []

    def receive(self, chunk: bytes) -> list[Command]:
        """A chunk of the provider's body arrived. It is forwarded before it is observed
        (`forwarded`), unless bytes are released per event or it completes the body."""
        if not self._go(Event.CHUNK):
            return []
        tap = self._tap
        if tap is None:
            return [Forward(chunk)]
        if tap.completed_by(chunk):
            # The client's response completes with these bytes: the outcome comes first.
            visible = tap.feed(chunk)
            return [*self._finish(Ending.BODY_ENDED), Forward(visible), EndResponse()]
        if not tap.holds_back:
            return [Forward(chunk, observe=True)]
        # Complete events but a hidden one go out first; they are decoded in `forwarded`.
        return [Forward(tap.release(chunk), observe=True)]

    def forwarded(self, chunk: bytes) -> list[Command]:
        """A chunk from a `Forward(observe=True)` is on its way to the client: observe it."""
        tap = self._tap
        if tap is None or self.phase is Phase.DONE:
            return []
        if tap.holds_back:
            rest = tap.observe_released()  # bytes held, should observing have failed now
            return [Forward(rest), *self._marker()] if rest else self._marker()
        tap.feed(chunk)
        return self._marker()

    def frame(self, frame: ServerFrame) -> list[Command]:
        """An event frame of a response over a WebSocket arrived; the client has it already
        (each frame is an event: nothing is held back). The first is the response's head,
        with the status an error event in its place carries; the final one ends the
        response as a body's end does."""
        if self.phase is Phase.WAITING and self._go(Event.HEAD):
            self._status = frame.status or 200
            if self._adapter is not None and self._frames is not None:
                self._frame_tap = FrameTap(self._adapter, self._frames, self._status)
        if not self._go(Event.CHUNK):
            return []
        if self._frame_tap is not None:
            self._frame_tap.observe(frame)
        return self._finish(Ending.BODY_ENDED) if frame.final else self._marker()

    def _marker(self) -> list[Command]:
        tap = self._tap or self._frame_tap
        if tap is not None and tap.ended and self._go(Event.MARKER):
            assembler = tap.assembler
            return self._settle(Settle(assembler.usage, assembler.billing, assembler.model))
        return []

    def body_ended(self) -> list[Command]:
        """The provider's body ended normally."""
        if self.phase is Phase.DONE:
            self._go(Event.BODY_END)
            return []
        rest = self._tap.finish() if self._tap is not None else b""
        head: list[Command] = [Forward(rest)] if rest else []
        return [*head, *self._finish(Ending.BODY_ENDED), EndResponse()]

    def client_gone(self) -> list[Command]:
        """The client went away (reset, cancel, its timeout) before its response was
        complete, or before the provider's response head arrived."""
        if self.phase is Phase.DONE:
            return []
        return [CloseUpstream(), *self._finish(Ending.CLIENT_GONE)]

    def provider_broke(self) -> list[Command]:
        """The provider's connection failed mid-body."""
        if self.phase is Phase.DONE:
            return []
        return [AbortClient(), *self._finish(Ending.PROVIDER_BROKE)]

    def timed_out(self) -> list[Command]:
        """The provider stayed silent past the read timeout mid-body."""
        if self.phase is Phase.DONE:
            return []
        return [AbortClient(), *self._finish(Ending.TIMEOUT)]

    def unreachable(self, status: int, error: dict[str, Any]) -> list[Command]:
        """No response head: the provider could not be reached or did not answer in time."""
        if not self._go(Event.UNREACHABLE):
            return []
        decision = decide(Seen.NOTHING, Ending.UNREACHABLE, None, [])
        outcome = Outcome(
            Ending.UNREACHABLE,
            decision.stop_reason,
            http_status=status,
            error=error,
            violations=tuple(decision.violations),
            anomalies=self._noted(),
        )
        return [*self._settle(Settle(outcome.usage)), Finished(outcome)]

    def _settle(self, spent: Settle) -> list[Command]:
        if self._settled:
            return []
        self._settled = True
        return [spent]

    def _finish(self, ending: Ending) -> list[Command]:
        event = next(e for e, end in _ENDINGS.items() if end is ending)
        if not self._go(event):
            return []
        outcome = self._outcome(ending)
        spent = Settle(outcome.usage, outcome.billing, outcome.model)
        return [*self._settle(spent), Finished(outcome)]

    def _outcome(self, ending: Ending) -> Outcome:
        tap, status = self._tap or self._frame_tap, self._status
        if status is None:  # no response head: the client left while the provider worked
            decision = decide(Seen.NOTHING, ending, None, [])
            return Outcome(ending, decision.stop_reason, anomalies=self._noted())
        if tap is None:  # observed nothing by design
            decision = decide(Seen.BLIND, ending, None, [])
            return Outcome(ending, decision.stop_reason, status, anomalies=self._noted())
        seen = tap.seen()
        if seen is Seen.ERROR_STATUS:
            decision = decide(seen, ending, None, [])
            return Outcome(
                ending,
                decision.stop_reason,
                status,
                usage=tap.usage,
                error=tap.error_fields(),
                complete=True,
                anomalies=self._noted(tap),
            )
        return self._assembled(tap, seen, ending)

    def _assembled(self, tap: ResponseTap | FrameTap, seen: Seen, ending: Ending) -> Outcome:
        assembled = decided(tap.assembler, seen, ending)
        violations = assembled.violations
        if self._calls is not None:
            violations += self._calls.judge(assembled.output_items, assembled.stop_reason)
        return Outcome(
            ending,
            assembled.stop_reason,
            self._status,
            raw_stop_reason=assembled.raw_stop_reason,
            output_items=tuple(assembled.output_items),
            usage=assembled.usage,
            response_id=assembled.response_id,
            model=assembled.model,
            error=assembled.error,
            violations=tuple(violations),
            complete=assembled.complete,
            anomalies=self._noted(tap),
            billing=assembled.billing,
            refusal_category=assembled.refusal_category,
            pending=assembled.pending,
        )

    def _noted(self, tap: ResponseTap | FrameTap | None = None) -> tuple[Anomaly, ...]:
        """The exchange's anomalies so far, then its assembler's."""
        events = [Anomaly(AnomalyKind.EVENT, detail) for detail in self.anomalies]
        deltas = () if tap is None else tap.assembler.anomalies
        return (*events, *(Anomaly(AnomalyKind.DELTA, detail) for detail in deltas))
