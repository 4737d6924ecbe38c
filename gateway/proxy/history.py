"""The request's history checked before the provider: its pairing violations (less the
calls a terminal output tool ended) and the refusal they make under `enforce`."""

from __future__ import annotations

from gateway.checks import pairing
from gateway.config import KeyBudget
from gateway.errors import GatewayError
from gateway.items import Violation, ViolationKind
from gateway.protocols.base import ParsedRequest, ProtocolAdapter
from gateway.proxy.placement import Placement
from gateway.runs.status import TERMINAL, mark_terminal


def history_violations(
    adapter: ProtocolAdapter, parsed: ParsedRequest, placement: Placement, terminal: tuple[str, ...]
) -> list[Violation]:
    previous = placement.previous
    found = pairing.check_request(
        placement.items,
        history=adapter.history,
        new_items=placement.new_items,
        previous_output=None if previous is None else list(previous.output_items),
        continues_response=parsed.previous_response_id is not None,
        unseen_calls=placement.unresolved_references,
    )
    if not any(v.kind is ViolationKind.MISSING_TOOL_RESULT for v in found):
        return found
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


def pairing_refusal(
    default_mode: str, adapter: ProtocolAdapter, violations: list[Violation], key: KeyBudget | None
) -> GatewayError | None:
    mode = (key.pairing if key is not None else None) or default_mode
    if mode != "enforce":
        return None
    first = pairing.first_enforceable(violations)
    if first is None:
        return None
    violations[violations.index(first)] = Violation(
        first.kind, first.detail, first.call_id, enforced=True
    )
    return pairing.to_error(first, history=adapter.history)
