"""OpenAI Responses API stream events and response bodies → neutral deltas.

Reasoning text never leaves this module, only its size and flags; `encrypted_content` if kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway import jsoncodec
from gateway.items import Item, ItemKind, StopReason, Usage
from gateway.protocols.json_values import as_dict, as_int, as_list, as_str
from gateway.protocols.openai_responses_hosted import (
    APPROVAL_REQUEST,
    EITHER_END,
    ROLE,
    TYPED,
    held_state,
    runs_at_provider,
    typed_items,
)
from gateway.protocols.openai_responses_tools import BUILTIN_CALLS, qualified
from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    ItemsDelta,
    MessageIdDelta,
    MetaDelta,
    ReasoningDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from gateway.stream.sse import SSEEvent

# Summaries arrive in parts (and in several reasoning items); a blank line keeps them apart.
SUMMARY_SEPARATOR = "\n\n"
ENCRYPTED_CONTENT = "encrypted_content"  # kept (as a blob) only with keep_opaque_reasoning

# Output items that are tool calls the client runs: JSON `arguments` or free-form `input`.
CALL_TYPES = frozenset({"function_call", "custom_tool_call", *BUILTIN_CALLS})
_CUSTOM = {"type": "custom_tool_call"}

_INCOMPLETE_REASONS = {
    "max_output_tokens": StopReason.LENGTH,
    "content_filter": StopReason.CONTENT_FILTER,
}
# A response's statuses before its end (`Response.status`, openai/types/responses/response.py).
_WORKING = frozenset({"queued", "in_progress"})


def as_code(value: Any) -> str | None:
    """Error codes are strings in OpenAI's API, numbers in some compatible servers."""
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, int) else None


def arguments_text(value: Any) -> str | None:
    """Arguments are a JSON string on the wire; compatible servers sometimes send an object."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return None


def caller_attrs(item: dict[str, Any]) -> dict[str, Any]:
    """`caller` of a client call made by a `program` the provider runs: that program's call."""
    caller = as_dict(item.get("caller"))
    caller_id = as_str(caller.get("caller_id"))
    if caller_id is None:
        return {}
    return {"caller": caller_id, "caller_type": as_str(caller.get("type"))}


def asks_client(item: dict[str, Any]) -> bool:
    """An output item the client must answer: a call of its own tool, or an approval the
    provider asks for before it runs an MCP tool."""
    kind = as_str(item.get("type"))
    if kind in CALL_TYPES:
        return kind not in EITHER_END or not runs_at_provider(item)
    return kind == APPROVAL_REQUEST


def other_item(item: dict[str, Any]) -> Item:
    """An output item of a type not known here, kept in its place as its echo is typed."""
    kind = as_str(item.get("type")) or "unknown"
    return Item(ItemKind.OTHER, role=ROLE, attrs=_ids({"type": kind, **held_state(item)}, item))


def _ids(attrs: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """The item's id beside what it was typed as, so an `item_reference` to it resolves."""
    item_id = as_str(item.get("id"))
    return {**attrs, "item_ids": [item_id]} if item_id else attrs


def usage_of(value: Any) -> Usage | None:
    """Shape: openai.types.responses.ResponseUsage (cache writes: its input_tokens_details)."""
    usage = as_dict(value)
    if not usage:
        return None
    inputs = as_dict(usage.get("input_tokens_details"))
    return Usage(
        prompt_tokens=as_int(usage.get("input_tokens")),
        completion_tokens=as_int(usage.get("output_tokens")),
        total_tokens=as_int(usage.get("total_tokens")),
        cached_tokens=as_int(inputs.get("cached_tokens")),
        reasoning_tokens=as_int(
            as_dict(usage.get("output_tokens_details")).get("reasoning_tokens")
        ),
        cache_creation_tokens=as_int(inputs.get("cache_write_tokens")),
    )


def error_delta(error: dict[str, Any]) -> ErrorDelta:
    return ErrorDelta(
        message=as_str(error.get("message")) or "",
        type=as_str(error.get("type")),
        code=as_code(error.get("code")),
    )


def meta_of(response: dict[str, Any]) -> MetaDelta:
    return MetaDelta(response_id=as_str(response.get("id")), model=as_str(response.get("model")))


@dataclass(slots=True)
class OutputFacts:
    """What the output held, for the stop reason: calls, visible text, refusals."""

    calls: bool = False
    text: bool = False
    refusal: bool = False

    def add_item(self, item: dict[str, Any]) -> None:
        kind = as_str(item.get("type"))
        if asks_client(item):
            self.calls = True
        elif kind == "message":
            for part in map(as_dict, as_list(item.get("content"))):
                if part.get("type") == "output_text" and as_str(part.get("text")):
                    self.text = True
                elif part.get("type") == "refusal":
                    self.refusal = True


def _call_input(item: dict[str, Any]) -> Any:
    """What a call output item asks: JSON `arguments`, free-form `input`, or a built-in
    tool's `action`/`operation` object."""
    kind = as_str(item.get("type")) or ""
    if kind == "custom_tool_call":
        return item.get("input")
    builtin = BUILTIN_CALLS.get(kind)
    return item.get(builtin[1]) if builtin else item.get("arguments")


def finish_of(response: dict[str, Any], facts: OutputFacts) -> FinishDelta:
    status = as_str(response.get("status"))
    for item in as_list(response.get("output")):
        facts.add_item(as_dict(item))
    if status == "completed":
        if facts.calls:
            return FinishDelta(StopReason.TOOL_CALLS, status)
        if facts.refusal and not facts.text:
            return FinishDelta(StopReason.REFUSAL, status)
        return FinishDelta(StopReason.COMPLETED, status)
    if status == "incomplete":
        reason = as_str(as_dict(response.get("incomplete_details")).get("reason"))
        stop = _INCOMPLETE_REASONS.get(reason or "", StopReason.UNKNOWN)
        return FinishDelta(stop, reason or status)
    if status == "failed":
        code = as_code(as_dict(response.get("error")).get("code"))
        return FinishDelta(StopReason.ERROR, code or status)
    if status == "cancelled":
        return FinishDelta(StopReason.CANCELLED, status)
    # A background response answered (or polled) before its end.
    return FinishDelta(StopReason.UNKNOWN, status, pending=status in _WORKING)


class ResponsesEventDecoder:
    """Per-response state: which output items have started, streamed content or ended."""

    def __init__(self, *, keep_opaque: bool = False) -> None:
        self._keep_opaque = keep_opaque  # `keep_opaque_reasoning`: encrypted_content kept
        self._calls_started: set[int] = set()
        self._calls_named: set[int] = set()
        self._calls_ended: set[int] = set()
        self._reasoning_started: set[int] = set()
        self._reasoning_streamed: set[int] = set()
        self._content_streamed: set[int] = set()  # text, refusal or summary deltas arrived
        self._summary_part: tuple[int, int] | None = None
        self._error_reported = False
        self._facts = OutputFacts()
        self._shells: set[str] = set()  # hosted shell calls: their outputs are the provider's

    def decode(self, event: SSEEvent) -> list[Delta]:
        try:
            data = jsoncodec.loads(event.data)
        except (ValueError, RecursionError):
            return []  # keep-alives and non-JSON lines carry nothing to record
        if not isinstance(data, dict):
            return []
        return self._dispatch(as_str(data.get("type")) or event.event or "", data)

    def decode_data(self, data: dict[str, Any]) -> list[Delta]:
        """An event already parsed (a WebSocket frame carries one, named by its `type`)."""
        return self._dispatch(as_str(data.get("type")) or "", data)

    def _dispatch(self, kind: str, data: dict[str, Any]) -> list[Delta]:
        index = as_int(data.get("output_index")) or 0
        delta = as_str(data.get("delta")) or ""
        match kind:
            case "response.created" | "response.in_progress" | "response.queued":
                return [meta_of(as_dict(data.get("response")))]
            case "response.output_item.added":
                return self._item_added(index, as_dict(data.get("item")))
            case "response.output_item.done":
                return self.item_done(index, as_dict(data.get("item")))
            case "response.function_call_arguments.delta":
                return self._arguments(index, delta, {})
            case "response.function_call_arguments.done":
                return self._end_call(index, data.get("arguments"))
            case "response.custom_tool_call_input.delta":
                return self._arguments(index, delta, _CUSTOM)
            case "response.custom_tool_call_input.done":
                return self._end_call(index, data.get("input"))
            case "response.output_text.delta":
                return self._text(index, delta)
            case "response.refusal.delta":
                return self._refusal(index, delta)
            case "response.reasoning_text.delta":
                self._reasoning_streamed.add(index)
                return [ReasoningDelta(chars=len(delta))] if delta else []
            case "response.reasoning_summary_text.delta":
                self._content_streamed.add(index)
                return self._summary((index, as_int(data.get("summary_index")) or 0), delta)
            case "error":
                self._error_reported = True
                # Documented flat form: code and message beside the event's own `type`.
                return [error_delta(as_dict(data.get("error")) or {**data, "type": None})]
            case "response.completed" | "response.incomplete" | "response.failed":
                response = as_dict(data.get("response"))
                return [meta_of(response), *self.terminal(response)]
        return []

    def item_done(self, index: int, item: dict[str, Any]) -> list[Delta]:
        """An output item is complete: emit whatever of it was not streamed (all, for a body).
        Items of tools the provider defines, and of types not known here, come whole."""
        kind = as_str(item.get("type"))
        if kind in TYPED:
            typed = typed_items(item, _ids({}, item), self._shells)
            if typed is not None:
                self._facts.calls = self._facts.calls or kind == APPROVAL_REQUEST
                return [ItemsDelta(tuple(typed))]
        if kind in CALL_TYPES:
            return [*self._start_call(index, item), *self._end_call(index, _call_input(item))]
        if kind == "reasoning":
            return self._reasoning_done(index, item)
        if kind == "message":
            return self._message_id(item) + self._message_done(index, item)
        return [ItemsDelta((other_item(item),))]

    def _message_id(self, item: dict[str, Any]) -> list[Delta]:
        item_id = as_str(item.get("id"))
        return [MessageIdDelta(item_id)] if item_id else []

    def _message_done(self, index: int, item: dict[str, Any]) -> list[Delta]:
        deltas: list[Delta] = []
        if index not in self._content_streamed:
            for part in map(as_dict, as_list(item.get("content"))):
                if part.get("type") == "output_text":
                    deltas += self._text(index, as_str(part.get("text")) or "")
                elif part.get("type") == "refusal":
                    deltas += self._refusal(index, as_str(part.get("refusal")) or "")
        return deltas

    def terminal(self, response: dict[str, Any]) -> list[Delta]:
        """Usage, stop reason and the completion marker of a finished response."""
        deltas: list[Delta] = []
        usage = usage_of(response.get("usage"))
        if usage is not None:
            deltas.append(UsageDelta(usage))
        error = as_dict(response.get("error"))
        if error and not self._error_reported:
            # A failure the model caused may come without a separate `error` event.
            self._error_reported = True
            deltas.append(error_delta(error))
        deltas += [finish_of(response, self._facts), EndDelta()]
        return deltas

    def _item_added(self, index: int, item: dict[str, Any]) -> list[Delta]:
        kind = as_str(item.get("type"))
        # Whose a shell call or a tool search is, its done item says for sure.
        if kind in CALL_TYPES and kind not in EITHER_END:
            return self._start_call(index, item)
        if kind == "reasoning":
            return self._start_reasoning(index, item)
        return []

    def _start_call(self, index: int, item: dict[str, Any]) -> list[Delta]:
        """The call's start, once; again only to name a call whose input streamed before any
        item said what it is (a server that sends no `output_item.added`)."""
        call_id, namespace = as_str(item.get("call_id")), as_str(item.get("namespace"))
        kind = as_str(item.get("type"))
        builtin = BUILTIN_CALLS.get(kind or "")
        name = builtin[0] if builtin else qualified(as_str(item.get("name")), namespace)
        if index in self._calls_started and (index in self._calls_named or not name):
            return []
        self._calls_started.add(index)
        if name:
            self._calls_named.add(index)
        self._facts.calls = True
        attrs: dict[str, Any] = {"namespace": namespace} if namespace else {}
        attrs.update(caller_attrs(item))
        if kind == "custom_tool_call":
            attrs["free_form"] = True
        elif builtin:
            attrs["type"] = kind
        return [ToolCallStart(index, call_id, name, item_id=as_str(item.get("id")), attrs=attrs)]

    def _arguments(self, index: int, delta: str, item: dict[str, Any]) -> list[Delta]:
        """A fragment of a call's JSON arguments or of a custom call's free-form input."""
        return [*self._start_call(index, item), ToolCallArgs(index, delta)] if delta else []

    def _end_call(self, index: int, arguments: Any) -> list[Delta]:
        if index in self._calls_ended:
            return []
        self._calls_ended.add(index)
        return [ToolCallEnd(index, arguments_text(arguments))]

    def _start_reasoning(self, index: int, item: dict[str, Any]) -> list[Delta]:
        if index in self._reasoning_started:
            return []
        self._reasoning_started.add(index)
        item_id = as_str(item.get("id"))
        return [ReasoningDelta(chars=0, item_id=item_id)]

    def _reasoning_done(self, index: int, item: dict[str, Any]) -> list[Delta]:
        deltas = self._start_reasoning(index, item)
        if index not in self._reasoning_streamed:
            for part in map(as_dict, as_list(item.get("content"))):
                text = as_str(part.get("text")) or ""
                if text:
                    deltas.append(ReasoningDelta(chars=len(text)))
        encrypted = item.get("encrypted_content")
        if encrypted:
            attrs: dict[str, Any] = {"encrypted": True}
            if self._keep_opaque and isinstance(encrypted, str):
                attrs[OPAQUE] = {ENCRYPTED_CONTENT: encrypted}
            deltas.append(ReasoningDelta(chars=0, attrs=attrs))
        if index not in self._content_streamed:
            for number, part in enumerate(map(as_dict, as_list(item.get("summary")))):
                deltas += self._summary((index, number), as_str(part.get("text")) or "")
        return deltas

    def _summary(self, part: tuple[int, int], text: str) -> list[Delta]:
        if not text:
            return []
        deltas: list[Delta] = []
        if self._summary_part is not None and self._summary_part != part:
            deltas.append(ReasoningSummaryDelta(SUMMARY_SEPARATOR))
        self._summary_part = part
        deltas.append(ReasoningSummaryDelta(text))
        return deltas

    def _text(self, index: int, text: str) -> list[Delta]:
        if not text:
            return []
        self._content_streamed.add(index)
        self._facts.text = True
        return [TextDelta(text)]

    def _refusal(self, index: int, text: str) -> list[Delta]:
        if not text:
            return []
        self._content_streamed.add(index)
        self._facts.refusal = True
        return [RefusalDelta(text)]


def decode_response_body(body: Any, *, keep_opaque: bool = False) -> list[Delta]:
    """A non-streamed response object: as if a stream had sent only its done items."""
    if not isinstance(body, dict):
        return []
    decoder = ResponsesEventDecoder(keep_opaque=keep_opaque)
    deltas: list[Delta] = [meta_of(body)]
    for index, item in enumerate(as_list(body.get("output"))):
        deltas += decoder.item_done(index, as_dict(item))
    return deltas + decoder.terminal(body)
