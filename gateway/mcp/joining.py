"""Which model tool call an MCP `tools/call` executes: the model's recent calls, indexed by
trace and by call id, matched by name and canonical arguments. Sans-IO."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gateway.items import Item, ItemKind
from gateway.mcp.texts import canonical, mcp_names

MAX_CALLS = 50_000  # model calls remembered at most, oldest forgotten first


@dataclass(slots=True)
class ModelCall:
    trace_id: str
    call_id: str
    tool_name: str
    arguments: str  # canonical
    seen: float  # monotonic seconds
    matched: bool = False


class ModelCalls:
    """The model's tool calls of the last `window` seconds, and the traces seen by their OTel
    trace id (`otel_id`: how the exporter derives it from a Loopwatch trace id)."""

    def __init__(self, window: float, otel_id: Callable[[str], int] | None = None) -> None:
        self._window = window
        self._otel_id = otel_id
        self._calls: OrderedDict[str, ModelCall] = OrderedDict()
        # MCP tool name -> ids of the calls it may execute, oldest first (a set in order).
        self._by_name: dict[str, dict[str, None]] = {}
        self._otel: OrderedDict[int, str] = OrderedDict()

    def add(self, trace_id: str, items: Iterable[Item], now: float) -> list[ModelCall]:
        self.note_trace(trace_id)
        added = []
        for item in items:
            if item.kind is not ItemKind.TOOL_CALL or not item.call_id or not item.tool_name:
                continue
            call = ModelCall(trace_id, item.call_id, item.tool_name, canonical(item.arguments), now)
            self._forget(self._calls.pop(item.call_id, None))
            self._calls[item.call_id] = call
            for name in mcp_names(call.tool_name):
                self._by_name.setdefault(name, {})[call.call_id] = None
            added.append(call)
        while len(self._calls) > MAX_CALLS:
            self._forget(self._calls.popitem(last=False)[1])
        return added

    def _forget(self, call: ModelCall | None) -> None:
        if call is None:
            return
        for name in mcp_names(call.tool_name):
            ids = self._by_name.get(name)
            if ids is not None:
                ids.pop(call.call_id, None)
                if not ids:
                    del self._by_name[name]

    def note_trace(self, trace_id: str) -> None:
        if self._otel_id is None:
            return
        otel = self._otel_id(trace_id)
        self._otel[otel] = trace_id
        self._otel.move_to_end(otel)
        while len(self._otel) > MAX_CALLS:
            self._otel.popitem(last=False)

    def trace_of_otel(self, otel_trace_id: int) -> str | None:
        return self._otel.get(otel_trace_id)

    def by_call_id(self, call_id: str) -> ModelCall | None:
        return self._calls.get(call_id)

    def candidates(
        self, tool: str, arguments: object, now: float, trace_id: str | None = None
    ) -> list[ModelCall]:
        """Unmatched calls of the window with this tool and these arguments, oldest first."""
        wanted = canonical(arguments)
        found = []
        for call_id in self._by_name.get(tool, ()):
            call = self._calls[call_id]
            if (
                not call.matched
                and now - call.seen <= self._window
                and (trace_id is None or call.trace_id == trace_id)
                and call.arguments == wanted
            ):
                found.append(call)
        return found


def otel_trace_id(traceparent: object) -> int | None:
    """The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), or None."""
    if not isinstance(traceparent, str):
        return None
    parts = traceparent.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32:
        return None
    try:
        value = int(parts[1], 16)
    except ValueError:
        return None
    return value or None
