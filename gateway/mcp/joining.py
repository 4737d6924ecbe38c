"""Which model tool call an MCP `tools/call` executes: the model's recent calls, indexed by
trace and by call id, matched by name and canonical arguments. Sans-IO."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gateway.items import Item, ItemKind
from gateway.mcp.texts import canonical, mcp_names
from gateway.memory import ENTRY, MODEL_CALLS_BYTES, SLOTS, STR, text_bytes

# A trace noted by its OTel id: an entry in each of two maps, its id, the OTel id (an int).
TRACE_BYTES = 2 * ENTRY + 2 * (STR + 32) + 44
# The calls get three quarters of the budget, the traces' OTel ids the rest.
TRACES = MODEL_CALLS_BYTES // 4 // TRACE_BYTES  # remembered at most, oldest forgotten first


def call_bytes(call: ModelCall) -> int:
    """A call, its entry under each MCP name it may go by, and its canonical arguments to
    come (about the size of the sent ones)."""
    strings = text_bytes(call.trace_id) + text_bytes(call.call_id) + text_bytes(call.tool_name)
    arguments = 2 * text_bytes(call.sent_arguments)
    return SLOTS + ENTRY + strings + arguments + ENTRY * len(mcp_names(call.tool_name))


@dataclass(slots=True)
class ModelCall:
    trace_id: str
    call_id: str
    tool_name: str
    sent_arguments: str | None  # as the model sent them
    seen: float  # monotonic seconds
    matched: bool = False
    canonical_arguments: str | None = None

    @property
    def arguments(self) -> str:
        """Canonical, made when first compared: most calls never meet an MCP execution, and
        every model step is added here on the event loop."""
        if self.canonical_arguments is None:
            self.canonical_arguments = canonical(self.sent_arguments)
        return self.canonical_arguments


class ModelCalls:
    """The model's tool calls of the last `window` seconds, and the traces seen by their OTel
    trace id (`otel_id`: how the exporter derives it from a Loopwatch trace id)."""

    def __init__(
        self,
        window: float,
        otel_id: Callable[[str], int] | None = None,
        budget: int = MODEL_CALLS_BYTES * 3 // 4,
    ) -> None:
        self._window = window
        self._otel_id = otel_id
        self._budget = budget  # bytes of calls held, oldest forgotten first
        self._held = 0
        self._calls: OrderedDict[str, tuple[ModelCall, int]] = OrderedDict()
        # MCP tool name -> ids of the calls it may execute, oldest first (a set in order).
        self._by_name: dict[str, dict[str, None]] = {}
        self._otel: OrderedDict[int, str] = OrderedDict()
        # Traces seen since the last lookup by OTel id, hashed into `_otel` at that lookup
        # (a SHA-256 a step otherwise; lookups come only with MCP traffic).
        self._unhashed: OrderedDict[str, None] = OrderedDict()

    def add(self, trace_id: str, items: Iterable[Item], now: float) -> list[ModelCall]:
        self.note_trace(trace_id)
        added = []
        for item in items:
            if item.kind is not ItemKind.TOOL_CALL or not item.call_id or not item.tool_name:
                continue
            call = ModelCall(trace_id, item.call_id, item.tool_name, item.arguments, now)
            self._forget(self._calls.pop(item.call_id, None))
            added.append(call)
            size = call_bytes(call)
            if size > self._budget:
                continue  # would push out every other call, then itself
            self._calls[item.call_id] = (call, size)
            self._held += size
            for name in mcp_names(call.tool_name):
                self._by_name.setdefault(name, {})[call.call_id] = None
        while self._held > self._budget and self._calls:
            self._forget(self._calls.popitem(last=False)[1])
        return added

    def _forget(self, entry: tuple[ModelCall, int] | None) -> None:
        if entry is None:
            return
        call, size = entry
        self._held -= size
        for name in mcp_names(call.tool_name):
            ids = self._by_name.get(name)
            if ids is not None:
                ids.pop(call.call_id, None)
                if not ids:
                    del self._by_name[name]

    def note_trace(self, trace_id: str) -> None:
        if self._otel_id is None:
            return
        unhashed = self._unhashed
        unhashed[trace_id] = None
        unhashed.move_to_end(trace_id)
        if len(unhashed) > TRACES:  # older than any trace the map would keep
            unhashed.popitem(last=False)

    def trace_of_otel(self, otel_trace_id: int) -> str | None:
        self._hash_noted()
        return self._otel.get(otel_trace_id)

    def _hash_noted(self) -> None:
        """The traces noted since the last lookup, in the order they were seen."""
        if self._otel_id is None:
            return
        otel_map, otel_id = self._otel, self._otel_id
        for trace_id in self._unhashed:
            otel = otel_id(trace_id)
            otel_map[otel] = trace_id
            otel_map.move_to_end(otel)
        self._unhashed.clear()
        while len(otel_map) > TRACES:
            otel_map.popitem(last=False)

    def by_call_id(self, call_id: str) -> ModelCall | None:
        found = self._calls.get(call_id)
        return None if found is None else found[0]

    def candidates(
        self, tool: str, arguments: object, now: float, trace_id: str | None = None
    ) -> list[ModelCall]:
        """Unmatched calls of the window with this tool and these arguments, oldest first."""
        wanted = canonical(arguments)
        found = []
        for call_id in self._by_name.get(tool, ()):
            call = self._calls[call_id][0]
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
