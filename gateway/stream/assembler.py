"""Assembly state machine: neutral deltas in, one step's output out.

Placeholder interface; the implementation follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.items import Item, StopReason, Usage, Violation
from gateway.stream.deltas import Delta


@dataclass(slots=True)
class Assembled:
    output_items: list[Item]
    stop_reason: StopReason
    raw_stop_reason: str | None
    usage: Usage
    response_id: str | None = None
    model: str | None = None
    error: dict[str, Any] | None = None  # {"message","type","code"} of an error event
    complete: bool = False  # the protocol's completion marker arrived
    violations: list[Violation] = field(default_factory=list)


class Assembler:
    def feed(self, delta: Delta) -> None:
        raise NotImplementedError

    def result(self, *, cancelled: bool = False) -> Assembled:
        raise NotImplementedError
