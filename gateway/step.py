"""Step: the record of one model request, built once when its exchange finishes and frozen.

No module changes a record after the proxy built it (redaction makes a redacted copy):
its sequences are tuples and its JSON objects read-only mappings, whoever builds it.
`STEP_FIELDS` declares, once, how each field is spooled, stored and redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

from gateway.items import (
    USAGE_FIELDS,
    Item,
    ItemKind,
    StopReason,
    Usage,
    Violation,
    ViolationKind,
)

# `attrs[PROTOCOL_HEADERS]`: the protocol's own request headers the step was sent with
# (ProtocolAdapter.recorded_headers: API version, betas), so that a cassette sends them
# again. Not named `…headers`: redaction hides every value of a headers object.
PROTOCOL_HEADERS = "api_versions"
# `attrs[FORK_OF]`, `attrs[FORK_AT]`: the trace and step a fork's first step was made from
# (the fork API); the trace row takes them from it.
FORK_OF = "fork_of"
FORK_AT = "fork_at"

# `ended_at` not given: derived from `started_at` and `latency_ms` when the record is built.
_DERIVED = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a run sits in a tree of runs: the run whose tool call started it (a sub-agent's
    parent), the call, the tree's root and how deep it is (a root: no parent, depth 0, its
    own root). `via` says how the link was known: header, traceparent or content."""

    root_trace_id: str
    depth: int = 0
    parent_trace_id: str | None = None
    parent_call_id: str | None = None
    via: str | None = None

    def child(self, trace_id: str, call_id: str | None, via: str) -> Lineage:
        """The lineage of a run this one's call (`call_id`) started."""
        return Lineage(self.root_trace_id, self.depth + 1, trace_id, call_id, via)

    def to_json(self) -> list[Any]:
        return [self.root_trace_id, self.depth, self.parent_trace_id, self.parent_call_id, self.via]


def lineage_of(row: list[Any] | None) -> Lineage | None:
    return None if row is None else Lineage(*row)


@dataclass(frozen=True, slots=True)
class Replay:
    """A step of a cassette's replay: the recorded trace it replays and, once the agent's
    requests left the recording, the step number where they first did (the store keeps the
    earliest a trace's steps name)."""

    of: str
    diverged_at: int | None = None

    def to_json(self) -> list[Any]:
        return [self.of, self.diverged_at]


def replay_of(row: list[Any] | None) -> Replay | None:
    return None if row is None else Replay(*row)


@dataclass(frozen=True, slots=True)
class StepRecord:
    id: str
    trace_id: str
    protocol: str  # chat | responses | messages | passthrough
    method: str
    path: str
    started_at: datetime
    model: str | None = None
    stream: bool = False
    http_status: int | None = None
    stop_reason: StopReason = StopReason.UNKNOWN
    raw_stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    provider_request_id: str | None = None
    response_id: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    input_items: tuple[Item, ...] = ()  # only those new in this trace
    output_items: tuple[Item, ...] = ()
    error: Mapping[str, Any] | None = None
    violations: tuple[Violation, ...] = ()
    # HMAC over the full input plus output: the key a later request's history continues.
    continuation_key: str | None = None
    budget_max_steps: int | None = None
    budget_max_tokens: int | None = None
    traceparent: str | None = None  # the caller's W3C trace context header, for export
    # What it cost: nano-dollars (None: the model has no known price) and where the price
    # came from ("genai-prices", "config", "unknown_model", "no_usage").
    cost_nano: int | None = None
    cost_source: str | None = None
    session_id: str | None = None  # raw; redacted with the rest before storage
    retry_of: str | None = None  # the step id of the failed attempt this one repeats
    # The request's tool declarations as sent and its other parameters (protocols.
    # request_facts); redacted with the rest before storage.
    declared_tools: tuple[Any, ...] | None = None
    params: Mapping[str, Any] | None = None
    # When the response ended (started_at + latency_ms): what orders traces newest first.
    ended_at: datetime = _DERIVED
    # Tool time before this request as this process saw it: from the end of the trace's
    # previous model response here (None: its first here, or not a model protocol). The
    # store derives its own, exact across replicas, from what it holds.
    tool_ms: float | None = None
    # Facts of the provider's side beyond the columns above (None: none), such as
    # {"requested_model": …, "refusal_category": …, "server_tool_requests": {"web_search":
    # 3}, "iterations": 2}: `gateway.exchange.closing.step_attrs` names them all.
    attrs: Mapping[str, Any] | None = None
    # The provider-side conversation it belongs to (ParsedRequest.conversation_id): a later
    # request naming it continues this step's trace.
    conversation_id: str | None = None
    # The mark (`items.HELD_STATE`) of the provider-held history its output holds (a
    # compaction item): a later request carrying it continues this step's trace.
    held_state: str | None = None
    # The run's place in a tree of runs as admission knew it (None: a root, or not known);
    # the trace row takes it from its first stored step.
    lineage: Lineage | None = None
    # The client's keyed API key fingerprint (StepStart.client): another replica finds a
    # sub-agent's parent call among this client's stored calls.
    client: str | None = None
    # Set by a cassette's replay alone (`loopwatch replay`): the trace row takes `replay_of`
    # from its first stored step and `diverged_at` from the earliest any step names.
    replay: Replay | None = None

    def __post_init__(self) -> None:
        # Liberal in what it takes: any iterable of items or violations is kept as a tuple,
        # a JSON object as a read-only view (decoded, redacted and built records alike).
        _freeze(self, ("input_items", "output_items", "violations", "declared_tools"))
        _read_only(self, ("error", "params", "attrs"))
        if self.ended_at is _DERIVED:
            object.__setattr__(self, "ended_at", response_end(self.started_at, self.latency_ms))


def _freeze(record: Any, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(record, name)
        if value is not None and not isinstance(value, tuple):
            object.__setattr__(record, name, tuple(value))


def _read_only(record: Any, names: tuple[str, ...]) -> None:
    # Top level only: the values inside are the request's or the provider's parsed JSON,
    # which no stage changes, and walking every tool schema would cost each request.
    for name in names:
        value = getattr(record, name)
        if type(value) is dict:
            object.__setattr__(record, name, MappingProxyType(value))


def response_end(started_at: datetime, latency_ms: float | None) -> datetime:
    """When a response that took `latency_ms` ended (its start when unknown)."""
    if latency_ms is None:
        return started_at
    return started_at + timedelta(milliseconds=latency_ms)


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    """A request refused before the provider (pairing, budget, loop, or a request the
    gateway cannot use): violations, not a step; it keeps the request's new input items so
    the refusal can be looked at."""

    trace_id: str
    created_at: datetime
    violations: tuple[Violation, ...]
    budget_exceeded: bool = False
    budget_max_steps: int | None = None
    budget_max_tokens: int | None = None
    # gateway.runs.status.RefusalKind: pairing | budget | loop; "request" (a body or header
    # the gateway cannot use) and "reasoning" (reasoning not sent back) count as a pairing
    # refusal there: the trace is `refused`.
    kind: str = "pairing"
    items: tuple[Item, ...] = ()
    session_id: str | None = None
    lineage: Lineage | None = None  # the run's place in its tree, as admission knew it
    # The trace and step a fork API request forks (its step's attrs FORK_OF, FORK_AT): a
    # refused fork's trace is still its fork.
    fork: tuple[str, int] | None = None

    def __post_init__(self) -> None:
        _freeze(self, ("violations", "items"))


@dataclass(frozen=True, slots=True)
class StepStart:
    """What is known of a step when its request goes upstream; its record adds the outcome."""

    id: str
    trace_id: str
    protocol: str
    method: str
    path: str
    started_at: datetime
    model: str | None = None
    stream: bool = False
    input_items: tuple[Item, ...] = ()
    violations: tuple[Violation, ...] = ()  # found in the request's history
    budget_max_steps: int | None = None
    budget_max_tokens: int | None = None
    traceparent: str | None = None
    session_id: str | None = None
    tools: Mapping[str, Any] | None = None  # declared function tools (ParsedRequest.tools)
    upstream_url: str | None = None  # where it went: names the provider for prices
    declared_tools: tuple[Any, ...] | None = None  # as sent (protocols.request_facts)
    params: Mapping[str, Any] | None = None
    conversation_id: str | None = None  # the provider-side conversation it belongs to
    # What the request asked beside a model's answer (ParsedRequest.attrs), e.g.
    # {"operation": "compact"}: merged into the record's attrs.
    attrs: Mapping[str, Any] | None = None
    lineage: Lineage | None = None  # the run's place in its tree (StepRecord.lineage)
    # The client's keyed key fingerprint: a later run of the same client may be this
    # step's calls' sub-agent (gateway.continuation.lineage).
    client: str | None = None

    def __post_init__(self) -> None:
        _freeze(self, ("input_items", "violations", "declared_tools"))
        _read_only(self, ("tools", "params", "attrs"))


# The step's shape, declared once

# How the redactor treats a field: a text, items, violations, or a JSON value (None passes).
Redaction = Literal["text", "items", "violations", "json"]


def plain_value(value: Any) -> Any:
    """A field's JSON form that is its value (most fields): decoding keeps it as parsed."""
    return value


_same = plain_value


def _column(name: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {name: value}


@dataclass(frozen=True, slots=True)
class Persisted:
    """One spooled field of a step: its JSON form in a spool line and back, the columns
    of the steps row it fills (None: not a steps column), and how it is redacted."""

    name: str
    to_json: Callable[[Any], Any] = _same
    from_json: Callable[[Any], Any] = _same
    columns: Callable[[Any], dict[str, Any]] | None = None
    redact: Redaction | None = None


def item_row(i: Item) -> tuple[Any, ...]:
    return (i.kind, i.role, i.text, i.call_id, i.tool_name, i.arguments, i.is_error, i.attrs)


def item_of(row: list[Any]) -> Item:
    kind, role, text, call_id, tool_name, arguments, is_error, attrs = row
    return Item(ItemKind(kind), role, text, call_id, tool_name, arguments, is_error, attrs)


def violation_row(v: Violation) -> tuple[Any, ...]:
    return (v.kind, v.detail, v.call_id, v.enforced)


def violation_of(row: list[Any]) -> Violation:
    kind, detail, call_id, enforced = row
    return Violation(ViolationKind(kind), detail, call_id, enforced)


def _rows(each: Callable[[Any], Any]) -> Callable[[Iterable[Any]], list[Any]]:
    return lambda values: [each(v) for v in values]


def _usage_row(u: Usage) -> tuple[int | None, ...]:
    return tuple(getattr(u, name) for name in USAGE_FIELDS)


def _stored(name: str, redact: Redaction | None = None, **codec: Any) -> Persisted:
    return Persisted(name, columns=_column(name), redact=redact, **codec)


# In the spool's order: a step's line is a JSON array of these values. Append only: a line
# spooled by an older release is shorter, and its missing fields decode as None.
STEP_FIELDS: tuple[Persisted, ...] = (
    _stored("id"),
    _stored("trace_id"),
    _stored("protocol"),
    _stored("method"),
    _stored("path", "text"),
    _stored("started_at", from_json=datetime.fromisoformat),
    _stored("model", "text"),
    _stored("stream"),
    _stored("http_status"),
    Persisted("stop_reason", from_json=StopReason, columns=lambda v: {"stop_reason": v.value}),
    _stored("raw_stop_reason", "text"),
    Persisted("usage", _usage_row, lambda row: Usage(*row), lambda u: u.to_json()),
    _stored("provider_request_id", "text"),
    _stored("response_id", "text"),
    _stored("latency_ms"),
    _stored("ttft_ms"),
    Persisted("input_items", _rows(item_row), _rows(item_of), redact="items"),
    Persisted("output_items", _rows(item_row), _rows(item_of), redact="items"),
    _stored("error", "json"),
    Persisted("violations", _rows(violation_row), _rows(violation_of), redact="violations"),
    _stored("continuation_key"),
    Persisted("budget_max_steps"),
    Persisted("budget_max_tokens"),
    _stored("cost_nano"),
    _stored("cost_source"),
    Persisted("session_id", redact="text"),
    _stored("retry_of"),
    Persisted("declared_tools", redact="json"),  # stored as the step's tool set
    _stored("params", "json"),
    Persisted("tool_ms"),  # the steps row's tool_ms is the store's own
    _stored("attrs", "json"),
    _stored("conversation_id", "text"),
    _stored("held_state"),
    Persisted("lineage", lambda v: None if v is None else v.to_json(), lineage_of),
    Persisted("client"),  # stored on the trace row
    Persisted("replay", lambda v: None if v is None else v.to_json(), replay_of),  # trace row
)
# Never spooled: the caller's trace context only goes to export; `ended_at` is derived.
NOT_SPOOLED = frozenset({"traceparent", "ended_at"})

# A refusal's line: every field, in this order (stored as violation rows, not columns).
REFUSAL_FIELDS: tuple[Persisted, ...] = (
    Persisted("trace_id"),
    Persisted("created_at", from_json=datetime.fromisoformat),
    Persisted("violations", _rows(violation_row), _rows(violation_of), redact="violations"),
    Persisted("budget_exceeded"),
    Persisted("budget_max_steps"),
    Persisted("budget_max_tokens"),
    Persisted("kind"),
    Persisted("items", _rows(item_row), _rows(item_of), redact="items"),
    Persisted("session_id", redact="text"),
    Persisted("lineage", lambda v: None if v is None else v.to_json(), lineage_of),
    Persisted("fork", from_json=tuple),  # stored on the trace row
)
