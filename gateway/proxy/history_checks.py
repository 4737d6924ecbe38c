"""The rules a request's history is held to before the provider, given the step it continues:
tool-call pairing and reasoning sent back (`gateway.checks`); their violations, and the
refusal when an enforced rule is broken (pairing first: its cause is the one to fix first).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.checks import pairing, reasoning
from gateway.config import KeyBudget, Settings
from gateway.errors import GatewayError
from gateway.items import Violation, ViolationKind
from gateway.protocols.base import ParsedRequest, ProtocolAdapter
from gateway.proxy.placement import Placement
from gateway.runs.status import TERMINAL, mark_terminal


@dataclass(frozen=True, slots=True)
class HistoryRefusal:
    error: GatewayError
    kind: str  # the refusal's kind as recorded: "pairing" or "reasoning"


def history_violations(
    adapter: ProtocolAdapter, parsed: ParsedRequest, placement: Placement, terminal: tuple[str, ...]
) -> list[Violation]:
    found = _pairing_violations(adapter, parsed, placement, terminal)
    previous = placement.previous
    # A continued response, thread or conversation: the provider holds that turn, nothing is
    # echoed.
    held = parsed.previous_response_id is not None or parsed.conversation_id is not None
    owes = not parsed.reasoning_off and not held
    if previous is not None and owes:
        found += reasoning.check_returned(
            previous.output_items, placement.items, placement.new_items
        )
    return found


def history_refusal(
    settings: Settings, adapter: ProtocolAdapter, violations: list[Violation], key: KeyBudget | None
) -> HistoryRefusal | None:
    """The refusal of an enforced rule; its violation is marked enforced in `violations`."""
    mode = (key.pairing if key is not None else None) or settings.pairing
    if mode == "enforce":
        first = pairing.first_enforceable(violations)
        if first is not None:
            violations[violations.index(first)] = Violation(
                first.kind, first.detail, first.call_id, enforced=True
            )
            return HistoryRefusal(pairing.to_error(first, history=adapter.history), "pairing")
    param = adapter.history.param
    error = reasoning.refusal(violations, settings.reasoning_check, param=param)
    return None if error is None else HistoryRefusal(error, "reasoning")


def _pairing_violations(
    adapter: ProtocolAdapter, parsed: ParsedRequest, placement: Placement, terminal: tuple[str, ...]
) -> list[Violation]:
    previous = placement.previous
    found = pairing.check_request(
        placement.items,
        history=adapter.history,
        new_items=placement.new_items,
        previous_output=None if previous is None else list(previous.output_items),
        # A conversation's items are prepended by the provider, like a previous response's.
        continues_response=parsed.previous_response_id is not None
        or parsed.conversation_id is not None,
        unseen_calls=placement.unresolved_references or parsed.held_state,
    )
    if not any(v.kind is ViolationKind.MISSING_TOOL_RESULT for v in found):
        return found
    if parsed.compaction:  # the results are owed after it
        return [v for v in found if v.kind is not ViolationKind.MISSING_TOOL_RESULT]
    # A terminal output tool's call hands over the run's answer: it needs no result.
    outputs = [] if previous is None else list(previous.output_items)
    ended = {
        i.call_id
        for i in mark_terminal([*placement.items, *outputs], terminal)
        if i.attrs.get(TERMINAL)
    }
    return [
        v
        for v in found
        if v.kind is not ViolationKind.MISSING_TOOL_RESULT or v.call_id not in ended
    ]
