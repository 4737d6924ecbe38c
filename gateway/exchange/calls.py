"""A step's tool calls judged where its outcome is decided: against the tools its request
declared (undeclared names, schemas) and against the trace's earlier calls (a loop).

Sans-IO. The per-trace counts live with their owner; the exchange reaches them through
`LoopCounter`, passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from gateway.checks.tools import DeclaredTools, ToolChecker
from gateway.items import Item, StopReason, Violation

log = logging.getLogger(__name__)


class LoopCounter(Protocol):
    """One trace's tool-call counts (`gateway.checks.loops.TraceLoops`)."""

    def observe(self, output_items: Iterable[Item]) -> list[Violation]:
        """Count a step's calls; a `repeated_tool_call` for each that reaches the threshold."""
        ...


@dataclass(frozen=True, slots=True)
class CallRules:
    """What one step's tool calls are judged by."""

    declared: DeclaredTools | None  # the request's tools; None: unknown, names not judged
    tools: ToolChecker
    loops: LoopCounter

    def judge(self, output_items: list[Item], stop_reason: StopReason) -> list[Violation]:
        """Undeclared tools, arguments that break their schema, then repeated calls. A
        failure here loses these violations, never the step or its response."""
        if not output_items:
            return []
        # Cut by the output limit: the first choice's arguments are reported as truncated.
        truncated = stop_reason is StopReason.LENGTH
        try:
            found = self.tools.check(self.declared, output_items, truncated=truncated)
            return found + self.loops.observe(output_items)
        except Exception:
            log.exception("judging a step's tool calls failed; its tool violations are lost")
            return []
