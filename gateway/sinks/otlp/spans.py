"""What a step becomes in OpenTelemetry: span names, GenAI semantic-convention attributes,
violation events and, when content capture is on, the conventions' message attributes.

Pure functions over records (no SDK, no I/O). The records come redacted (sinks.redacted):
every string from a client or a provider is shown as the recorder stores it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.items import Item, ItemKind, StopReason, Usage, Violation, provider_run
from gateway.protocols.registry import ADAPTERS
from gateway.routing import Provider
from gateway.step import StepRecord

Attributes = dict[str, str | bool | int | float | list[str]]

VIOLATION_EVENT = "loopwatch.violation"
REFUSAL_SPAN = "loopwatch.refusal"
# Stops after which the step did not end as its protocol completes: the span is an error.
# Finish reasons when the provider gave none, in the vocabulary providers use.
FINISH_REASONS = {
    StopReason.COMPLETED: "stop",
    StopReason.TOOL_CALLS: "tool_calls",
    StopReason.LENGTH: "length",
    StopReason.CONTENT_FILTER: "content_filter",
    StopReason.REFUSAL: "refusal",
}
USAGE_ATTRIBUTES = (
    ("prompt_tokens", "gen_ai.usage.input_tokens"),
    ("completion_tokens", "gen_ai.usage.output_tokens"),
    ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_creation_tokens", "gen_ai.usage.cache_write.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)
MAX_ERROR_TYPE = 64
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SpanPlan:
    """A span to start and end at once: everything the SDK needs, decided here."""

    name: str
    client: bool  # span kind CLIENT, else INTERNAL
    start_ns: int
    end_ns: int
    attributes: Attributes
    events: tuple[tuple[str, Attributes], ...] = ()
    error: str | None = None  # the status description when the span is an error
    children: tuple[SpanPlan, ...] = ()  # spans inside this one (tools the provider ran)
    span_id: int | None = None  # a derived id (gateway.ids.tool_span_id); None: random


def nanoseconds(at: datetime) -> int:
    moment = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def step_span(step: StepRecord, provider: Provider) -> SpanPlan:
    """The span of one step: `chat {model}` for the model protocols, kind CLIENT."""
    start, end = nanoseconds(step.started_at), nanoseconds(step.ended_at)
    if step.protocol == "passthrough":
        name, attributes = _passthrough(step)
    else:
        name, attributes = _model_call(step, provider)
    attributes.update(_server(provider))
    attributes["gen_ai.conversation.id"] = step.trace_id
    attributes["loopwatch.step.id"] = step.id
    attributes["loopwatch.stop_reason"] = step.stop_reason.value
    if step.http_status is not None:
        attributes["http.response.status_code"] = step.http_status
    cost = getattr(step, "cost_usd", None)  # a field of newer step records
    if isinstance(cost, int | float):
        attributes["loopwatch.cost_usd"] = float(cost)
    error = _failure(step)
    if error is not None:
        attributes["error.type"] = error
    elif step.violations:
        attributes["error.type"] = step.violations[0].kind.value
    return SpanPlan(
        name,
        True,
        start,
        end,
        attributes,
        violation_events(step.violations),
        _status(step, error),
    )


def _model_call(step: StepRecord, provider: Provider) -> tuple[str, Attributes]:
    model = step.model or None  # the model that answered
    # The one asked for, kept when another answered (an alias resolved, a fallback).
    requested = (step.attrs or {}).get("requested_model") or model
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider.name,
    }
    if requested:
        attributes["gen_ai.request.model"] = requested
    if step.stream:
        attributes["gen_ai.request.stream"] = True
        if step.ttft_ms is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = step.ttft_ms / 1000
    adapter = ADAPTERS.get(step.protocol)
    if adapter is not None:  # attributes of its own protocol the provider's conventions name
        attributes.update(adapter.span_attributes.get(provider.name, {}))
    answered = step.http_status is not None and step.http_status < 400
    if answered and model:
        attributes["gen_ai.response.model"] = model
    if step.response_id:
        attributes["gen_ai.response.id"] = step.response_id
    attributes["gen_ai.response.finish_reasons"] = [finish_reason(step)]
    attributes.update(usage_attributes(step.usage))
    return ("chat " + requested if requested else "chat"), attributes


def _passthrough(step: StepRecord) -> tuple[str, Attributes]:
    """Other /v1/* calls: embeddings are a GenAI operation, the rest plain HTTP calls."""
    attributes: Attributes = {
        "http.request.method": step.method,
        "url.path": step.path,
    }
    if step.path.endswith("/embeddings"):
        attributes["gen_ai.operation.name"] = "embeddings"
        return "embeddings", attributes
    return step.method, attributes


def _server(provider: Provider) -> Attributes:
    if not provider.address:
        return {}
    return {"server.address": provider.address, "server.port": provider.port}


def usage_attributes(usage: Usage) -> Attributes:
    found: Attributes = {}
    for field, attribute in USAGE_ATTRIBUTES:
        value = getattr(usage, field)
        if value is not None:
            found[attribute] = value
    return found


def finish_reason(step: StepRecord) -> str:
    """The provider's own reason; `error` when the generation ended abnormally, as the
    conventions ask, whatever the provider had said before it broke."""
    if step.stop_reason.broke:
        return "error"
    if step.raw_stop_reason:
        return step.raw_stop_reason
    return FINISH_REASONS.get(step.stop_reason, "unknown")


def _failure(step: StepRecord) -> str | None:
    """`error.type` of a failed step: the provider's (or gateway's) error code, else the
    HTTP status, else what ended the stream; None when the step did not fail."""
    if not step.stop_reason.broke:
        return None
    # Redacted like a stored one: an error nested too deeply to walk became a text.
    error = step.error if isinstance(step.error, Mapping) else {}
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and 0 < len(value) <= MAX_ERROR_TYPE:
            return value
    if step.http_status is not None and step.http_status >= 400:
        return str(step.http_status)
    if step.stop_reason is StopReason.INTERRUPTED:
        return "stream_interrupted"
    return "cancelled" if step.stop_reason is StopReason.CANCELLED else "_OTHER"


def _status(step: StepRecord, error: str | None) -> str | None:
    """A failed step, or one that broke a rule, is an error span; the description says why."""
    if error is not None:
        return f"step {step.stop_reason.value}: {error}"
    if step.violations:
        return "violations: " + ", ".join(sorted({v.kind.value for v in step.violations}))
    return None


def violation_events(violations: Iterable[Violation]) -> tuple[tuple[str, Attributes], ...]:
    events = []
    for violation in violations:
        attributes: Attributes = {
            "loopwatch.violation.kind": violation.kind.value,
            "loopwatch.violation.detail": violation.detail,
            "loopwatch.violation.enforced": violation.enforced,
        }
        if violation.call_id:
            attributes["gen_ai.tool.call.id"] = violation.call_id
        events.append((VIOLATION_EVENT, attributes))
    return tuple(events)


def tool_span(
    call_id: str | None,
    tool_name: str | None,
    start_ns: int,
    end_ns: int,
    *,
    tool_type: str = "function",
    span_id: int | None = None,
) -> SpanPlan:
    """`execute_tool {name}` (span kind INTERNAL, as the conventions ask); for a client's
    call, the agent's time between the call and the request with its result. `tool_type` in
    the conventions' words: a `function` runs at the client, an `extension` at the agent's
    side (here the provider)."""
    name = tool_name or None
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.type": tool_type,
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    if name:
        attributes["gen_ai.tool.name"] = name
    title = f"execute_tool {name}" if name else "execute_tool"
    return SpanPlan(title, False, start_ns, end_ns, attributes, span_id=span_id)


def provider_tool_spans(outputs: Sequence[Item], at_ns: int) -> tuple[SpanPlan, ...]:
    """`execute_tool {name}` for each tool the provider ran inside this answer (web search,
    code execution, its MCP connector): children of the step's span, zero-length at its end,
    since the provider tells neither when in the answer it ran nor for how long (a span as
    long as the model call would count the model's time as tool time). An error span when
    its result in the same answer is one; the result's text is content, never exported here."""
    ran = [item for item in outputs if provider_run(item)]
    if not ran:
        return ()
    failed = {i.call_id for i in ran if i.kind is ItemKind.TOOL_RESULT and i.is_error}
    plans = []
    for call in ran:
        if call.kind is not ItemKind.TOOL_CALL:
            continue
        plan = tool_span(call.call_id, call.tool_name, at_ns, at_ns, tool_type="extension")
        plan.attributes["loopwatch.tool.executed_by"] = "provider"
        tool_type = call.attrs.get("tool_type")
        if isinstance(tool_type, str) and tool_type:
            plan.attributes["loopwatch.tool.type"] = tool_type
        if call.call_id is not None and call.call_id in failed:
            plan.attributes["error.type"] = "tool_error"
            plan = replace(plan, error="tool_error")
        plans.append(plan)
    return tuple(plans)


def refusal_span(
    trace_id: str, at: datetime, violations: Iterable[Violation], budget: bool
) -> SpanPlan:
    """A request refused before the provider: no model call, only what was broken."""
    moment = nanoseconds(at)
    kinds = [v.kind.value for v in violations]
    attributes: Attributes = {
        "gen_ai.conversation.id": trace_id,
        "loopwatch.refusal.budget": budget,
        "error.type": kinds[0] if kinds else "_OTHER",
    }
    return SpanPlan(
        REFUSAL_SPAN,
        False,
        moment,
        moment,
        attributes,
        violation_events(violations),
        "refused: " + ", ".join(sorted(set(kinds))),
    )


# Content: the conventions' gen_ai.input.messages / output.messages / system_instructions,
# built from items that have been redacted (and cut to max_text_chars) like stored ones.


def content_attributes(
    step: StepRecord, inputs: Sequence[Item], outputs: Sequence[Item]
) -> Attributes:
    """JSON strings, as the conventions ask where spans take no structured attributes.
    Inputs are the messages new in this step: earlier ones are on the trace's earlier
    spans, so a long run exports linearly, not quadratically."""
    adapter = ADAPTERS.get(step.protocol)
    separate = [i for i in inputs if adapter is not None and adapter.is_separate_instruction(i)]
    history = [i for i in inputs if adapter is None or not adapter.is_separate_instruction(i)]
    found: Attributes = {}
    if separate:
        parts = [{"type": "text", "content": i.text or ""} for i in separate]
        found["gen_ai.system_instructions"] = _json(parts)
    if history:
        found["gen_ai.input.messages"] = _json(messages(history))
    if outputs or not step.stop_reason.broke:
        output = {"role": "assistant", "parts": _parts(outputs)}
        output["finish_reason"] = finish_reason(step)
        found["gen_ai.output.messages"] = _json([output])
    return found


def messages(items: list[Item]) -> list[dict[str, Any]]:
    """Consecutive items of one role make one message, as the wire formats group them."""
    grouped: list[dict[str, Any]] = []
    for item in items:
        if not _shown(item):
            continue
        role = _role(item)
        if not grouped or grouped[-1]["role"] != role:
            grouped.append({"role": role, "parts": []})
        grouped[-1]["parts"].append(_part(item))
    return grouped


def _shown(item: Item) -> bool:
    """A reasoning item without a summary says only that reasoning happened: no part."""
    return item.kind is not ItemKind.REASONING or bool(item.text)


def _parts(items: Sequence[Item]) -> list[dict[str, Any]]:
    return [_part(item) for item in items if _shown(item)]


def _role(item: Item) -> str:
    if item.kind is ItemKind.TOOL_RESULT:
        return "tool"
    if item.kind in (ItemKind.ASSISTANT_TEXT, ItemKind.TOOL_CALL, ItemKind.REASONING):
        return "assistant"
    if item.kind is ItemKind.INSTRUCTION:
        return "system" if item.role in (None, "system") else item.role
    return item.role or "user"


def _part(item: Item) -> dict[str, Any]:
    if item.kind is ItemKind.TOOL_CALL:
        return {
            "type": "tool_call",
            "id": item.call_id,
            "name": item.tool_name or "",
            "arguments": _arguments(item.arguments),
        }
    if item.kind is ItemKind.TOOL_RESULT:
        return {"type": "tool_call_response", "id": item.call_id, "response": item.text or ""}
    if item.kind is ItemKind.REASONING:
        # Never reasoning text: at most the provider's summary, as stored.
        return {"type": "reasoning", "content": item.text or ""}
    if item.kind is ItemKind.REFUSAL:
        return {"type": "refusal", "content": item.text or ""}
    if item.kind is ItemKind.OTHER:
        return {"type": str(item.attrs.get("type") or "other")}
    return {"type": "text", "content": item.text or ""}


def _arguments(arguments: str | None) -> Any:
    """An object where the (redacted) JSON parses, as the conventions prefer; else the text."""
    if arguments is None:
        return None
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
