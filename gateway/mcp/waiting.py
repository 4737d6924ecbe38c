"""The executions an MCP observer keeps: those waiting for their join, those waiting for the
model to get their result, and violations held until their execution joins a run; and
which of them are new, for the store's look-ups. Sans-IO."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from gateway.mcp.records import Execution, McpViolation, Outbox
from gateway.mcp.texts import delivery, result_text

MAX_WAITING = 10_000  # executions waiting for a join or a delivery, oldest forgotten first


class Waiting:
    def __init__(self, window: float) -> None:
        self._window = window
        self._waiting: OrderedDict[str, Execution] = OrderedDict()  # joining later
        self._by_call: OrderedDict[str, Execution] = OrderedDict()  # waiting for delivery
        # Violations of executions not joined yet: they count on the run it joins.
        self._held: OrderedDict[str, list[McpViolation]] = OrderedDict()
        self.fresh: list[tuple[str, Execution]] = []  # newly waiting: ("join"|"delivery", …)

    def _await_delivery(self, execution: Execution) -> None:
        assert execution.call_id is not None
        self._remember(self._by_call, execution.call_id, execution)
        self._pending("delivery", execution)

    def _pending(self, kind: str, execution: Execution) -> None:  # for the store's look-ups
        self.fresh.append((kind, execution))
        del self.fresh[:-MAX_WAITING]

    def forget_old(self, now: float) -> None:  # past the window, nothing joins them now
        while self._waiting:
            oldest = next(iter(self._waiting.values()))
            if now - oldest.started <= self._window:
                break
            del self._waiting[oldest.id]
            self._held.pop(oldest.id, None)

    def pending(self, kind: str, execution: Execution) -> bool:
        """Whether it still waits for its join (`join`) or its delivery."""
        table, key = (self._waiting, execution.id) if kind == "join" else (self._by_call, "")
        return table.get(key or execution.call_id or "") is execution

    def delivered(
        self, call_id: str, given: str, out: Outbox, as_given: Callable[[str], str] = str
    ) -> None:
        """The model got `given` as this call's result (`as_given`: the text as stored)."""
        execution = self._by_call.get(call_id)
        if execution is None or execution.outcome not in ("ok", "tool_error"):
            return
        del self._by_call[call_id]
        execution.delivery = delivery(given, as_given(result_text(execution.result)))
        out.add(execution)

    def _remember(self, table: OrderedDict[str, Execution], key: str, execution: Execution) -> None:
        table[key] = execution
        while len(table) > MAX_WAITING:
            table.popitem(last=False)

    def _hold(self, execution: Execution, violation: McpViolation) -> None:
        if execution.trace_id is None and execution.id in self._waiting:
            self._held.setdefault(execution.id, []).append(violation)
            while len(self._held) > MAX_WAITING:
                self._held.popitem(last=False)
