"""How a proxied exchange ended → its stop reason and stream violations: the one table.

Sans-IO. The exchange says what was seen of the response and how it ended; `decide` looks the
pair up in `RULES` and nowhere else is a stop decided; `decided` applies it to an assembler.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gateway.checks.output import check_output
from gateway.items import Item, ItemKind, StopReason, Violation, ViolationKind
from gateway.stream.assembler import Assembled, Assembler, State
from gateway.stream.deltas import FinishDelta


class Seen(Enum):
    """What observing the response learned, strongest first."""

    # Members are singletons: identity hashing, in C, for the transition tables.
    __hash__ = object.__hash__

    NOTHING = "nothing"  # no response head (provider unreachable, timed out, client left)
    ERROR_STATUS = "error_status"  # HTTP status >= 400
    BLIND = "blind"  # not observed by design (passthrough)
    ERROR_EVENT = "error_event"  # an error object in the stream or body
    MARKER = "marker"  # the protocol's completion marker arrived
    GAVE_UP = "gave_up"  # the observer stopped (unparseable encoding, broken body, its bug)
    PARTIAL = "partial"  # observed, marker missing


class Ending(Enum):
    """How the exchange's I/O ended."""

    # Members are singletons: identity hashing, in C, for the transition tables.
    __hash__ = object.__hash__

    BODY_ENDED = "body_ended"
    CLIENT_GONE = "client_gone"
    PROVIDER_BROKE = "provider_broke"
    TIMEOUT = "timeout"  # the provider went silent past read_timeout
    UNREACHABLE = "unreachable"  # no response head ever arrived


@dataclass(frozen=True, slots=True)
class Rule:
    stop: StopReason | None  # None: the provider's finish reason decides
    interrupted: bool = False  # record a stream_interrupted violation
    checks: bool = True  # run the output checks (tool arguments, stop mismatch)


_FROM_FINISH = Rule(None)
_ERROR = Rule(StopReason.ERROR, checks=False)
_CUT = (Ending.BODY_ENDED, Ending.PROVIDER_BROKE, Ending.TIMEOUT)
_RESPONDED = (*_CUT, Ending.CLIENT_GONE)  # a response head arrived

RULES: dict[tuple[Seen, Ending], Rule] = {
    (Seen.NOTHING, Ending.UNREACHABLE): _ERROR,
    # The client gave up before the provider answered (its timeout, a disconnect).
    (Seen.NOTHING, Ending.CLIENT_GONE): Rule(StopReason.CANCELLED, checks=False),
    **{(Seen.ERROR_STATUS, e): _ERROR for e in _RESPONDED},
    **{(Seen.ERROR_EVENT, e): Rule(StopReason.ERROR) for e in _RESPONDED},
    **{(Seen.MARKER, e): _FROM_FINISH for e in _RESPONDED},
    (Seen.BLIND, Ending.BODY_ENDED): Rule(StopReason.COMPLETED, checks=False),
    (Seen.BLIND, Ending.CLIENT_GONE): Rule(StopReason.CANCELLED, checks=False),
    (Seen.BLIND, Ending.PROVIDER_BROKE): Rule(StopReason.INTERRUPTED, checks=False),
    (Seen.BLIND, Ending.TIMEOUT): Rule(StopReason.INTERRUPTED, checks=False),
    # A client that left explains the missing end by itself.
    (Seen.PARTIAL, Ending.CLIENT_GONE): Rule(StopReason.CANCELLED),
    (Seen.GAVE_UP, Ending.CLIENT_GONE): Rule(StopReason.CANCELLED),
    **{(Seen.PARTIAL, e): Rule(StopReason.INTERRUPTED, interrupted=True) for e in _CUT},
    # Nothing reliable is known of a response the observer could not read.
    **{(Seen.GAVE_UP, e): Rule(StopReason.UNKNOWN, checks=False) for e in _CUT},
}
# Any pair missing above (say, a response head with "unreachable") is a caller bug; it is
# decided as unknown rather than raised, so recording never breaks a request.
_FALLBACK = Rule(StopReason.UNKNOWN, checks=False)


@dataclass(frozen=True, slots=True)
class Decision:
    stop_reason: StopReason
    violations: list[Violation]  # stream violations; output checks come on top when `checks`
    checks: bool


def decide(seen: Seen, ending: Ending, finish: FinishDelta | None, items: list[Item]) -> Decision:
    rule = RULES.get((seen, ending), _FALLBACK)
    stop = rule.stop if rule.stop is not None else _from_finish(finish, items)
    violations = [_interrupted(items)] if rule.interrupted else []
    return Decision(stop, violations, rule.checks)


def seen_by(assembler: Assembler) -> Seen:
    """What an assembler's deltas so far tell of the response's end."""
    if assembler.failed:
        return Seen.ERROR_EVENT
    return Seen.MARKER if assembler.state is State.ENDED else Seen.PARTIAL


def decided(assembler: Assembler, seen: Seen, ending: Ending) -> Assembled:
    """The assembled output, its stop reason and violations as the table decides them."""
    items, first = assembler.output()
    decision = decide(seen, ending, first, items)
    assembled = assembler.assemble(items, first, decision.stop_reason)
    assembled.violations.extend(decision.violations)
    if decision.checks:
        assembled.violations.extend(check_output(assembled))
    return assembled


def _from_finish(finish: FinishDelta | None, items: list[Item]) -> StopReason:
    if finish is None:
        return StopReason.UNKNOWN
    if finish.stop_reason is StopReason.COMPLETED and _only_refusal(items):
        return StopReason.REFUSAL
    return finish.stop_reason


def _only_refusal(items: list[Item]) -> bool:
    kinds = {item.kind for item in items} - {ItemKind.REASONING}
    return kinds == {ItemKind.REFUSAL}


def _interrupted(items: list[Item]) -> Violation:
    cut = [item for item in items if item.attrs.get("incomplete")]
    detail = "The stream ended before the provider's completion marker"
    if cut:
        names = ", ".join(repr(item.tool_name or "(unnamed)") for item in cut)
        detail += f"; tool call(s) {names} were cut off mid-arguments"
    return Violation(
        ViolationKind.STREAM_INTERRUPTED,
        detail + ".",
        call_id=cut[0].call_id if cut else None,
    )
