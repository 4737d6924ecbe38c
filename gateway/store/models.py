"""Tables of the trace store: traces, steps, tool sets, items, violations, the per-trace
model list, the sessions summary and meta."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel

ID_LENGTH = 128


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Stores naive UTC, returns aware UTC.

    Both dialects then compare and sort the same values; SQLite keeps DATETIME as text, so a
    stored offset would break ordering and keyset pagination.
    """

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is None:
            return value
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def _id(*, primary_key: bool = False, index: bool = False, nullable: bool = False) -> Any:
    return Field(
        sa_column=sa.Column(
            sa.String(ID_LENGTH), primary_key=primary_key, index=index, nullable=nullable
        )
    )


def _time(*, index: bool = False) -> Any:
    return Field(sa_column=sa.Column(UTCDateTime(), nullable=False, index=index))


def _count() -> Any:
    return Field(default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0"))


def _tokens(*, nullable: bool = False) -> Any:
    default = None if nullable else 0
    return Field(
        default=default, sa_column=sa.Column(sa.BigInteger, nullable=nullable, default=default)
    )


class TraceRow(SQLModel, table=True):
    __tablename__ = "traces"
    __table_args__ = (
        # Newest-first listing and its keyset cursor, with and without a status filter.
        sa.Index("ix_traces_updated", "updated_at", "id"),
        sa.Index("ix_traces_status_updated", "status", "updated_at", "id"),
        sa.Index("ix_traces_session_updated", "session_id", "updated_at", "id"),
        # The list's other sort orders, largest first, each with its keyset cursor.
        sa.Index("ix_traces_steps", "step_count", "id"),
        sa.Index("ix_traces_cost", "cost_nano", "id"),
        sa.Index("ix_traces_span", "span_ms", "id"),
        # A session's first activity again once retention took its oldest traces.
        sa.Index("ix_traces_session_started", "session_id", "started_at"),
        # A run's children, and a tree's runs (revision 0019).
        sa.Index("ix_traces_parent", "parent_trace_id"),
        sa.Index("ix_traces_root", "root_trace_id"),
        # A trace's replays and forks (revision 0020).
        sa.Index("ix_traces_replay_of", "replay_of"),
        sa.Index("ix_traces_fork_of", "fork_of"),
    )

    id: str = _id(primary_key=True)
    started_at: datetime = _time()
    updated_at: datetime = _time()
    status: str = Field(default="ok", sa_column=sa.Column(sa.String(32), nullable=False))
    step_count: int = Field(default=0, sa_column=sa.Column(sa.Integer, nullable=False))
    models: list[str] = Field(default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False))
    prompt_tokens: int = _tokens()
    completion_tokens: int = _tokens()
    total_tokens: int = _tokens()
    cached_tokens: int = _tokens()
    reasoning_tokens: int = _tokens()
    violation_count: int = Field(default=0, sa_column=sa.Column(sa.Integer, nullable=False))
    last_stop_reason: str | None = Field(default=None, sa_column=sa.Column(sa.String(32)))
    budget_max_steps: int | None = Field(default=None, sa_column=sa.Column(sa.Integer))
    budget_max_tokens: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))
    # How it ended (gateway.runs.status): the stored, time-free part of the status and the
    # summary it was settled from, so a late write folds in right.
    status_final: bool = Field(
        default=False, sa_column=sa.Column(sa.Boolean, nullable=False, server_default=sa.false())
    )
    last_step_started_at: datetime | None = Field(
        default=None, sa_column=sa.Column(UTCDateTime(), nullable=True)
    )
    open_calls: int = _count()
    last_refusal_at: datetime | None = Field(
        default=None, sa_column=sa.Column(UTCDateTime(), nullable=True)
    )
    last_refusal_kind: str | None = Field(default=None, sa_column=sa.Column(sa.String(16)))
    # Cost and time: dollars in nano-dollars (exact sums), times in milliseconds.
    cost_nano: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    unpriced_steps: int = _count()
    model_ms: float = Field(
        default=0.0, sa_column=sa.Column(sa.Float, nullable=False, server_default="0")
    )
    tool_ms: float = Field(
        default=0.0, sa_column=sa.Column(sa.Float, nullable=False, server_default="0")
    )
    last_response_end: datetime | None = Field(
        default=None, sa_column=sa.Column(UTCDateTime(), nullable=True)
    )
    # Whole milliseconds from the first request to the last response end (or the last
    # activity without one): the duration sort's key, so equal durations tie exactly.
    span_ms: float = Field(
        default=0.0, sa_column=sa.Column(sa.Float, nullable=False, server_default="0")
    )
    session_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    first_user_text: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    # Where the trace's rows are placed: its first stored batch's start, never changed, so on
    # a partitioned PostgreSQL store all its steps, items and violations share one time
    # partition (gateway.store.partitions.ranges); null for traces stored before revision 0011
    # until `loopwatch store partition` places them (on SQLite, for good).
    placed_at: datetime | None = Field(
        default=None, sa_column=sa.Column(UTCDateTime(), nullable=True)
    )
    # A run started by another run's tool call (a sub-agent): its parent run and call, its
    # tree's root (a root's own id; null for traces stored before revision 0019, roots all)
    # and its depth, written with the trace's first stored step and never changed.
    parent_trace_id: str | None = _id(nullable=True)
    parent_call_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    root_trace_id: str | None = _id(nullable=True)
    depth: int = _count()
    # The client's keyed API key fingerprint (gateway.checks.budgets.key_fingerprint): a
    # sub-agent's first request looks its parent's call up among the same client's runs.
    client: str | None = Field(default=None, sa_column=sa.Column(sa.String(64)))
    # A run made from another's record (revision 0020): a replay of a cassette of trace
    # `replay_of`, diverged from it at step `diverged_at` (null while it has not); a fork of
    # trace `fork_of`'s step `fork_at`. Written with the trace's first stored step.
    replay_of: str | None = _id(nullable=True)
    diverged_at: int | None = Field(default=None, sa_column=sa.Column(sa.Integer))
    fork_of: str | None = _id(nullable=True)
    fork_at: int | None = Field(default=None, sa_column=sa.Column(sa.Integer))


def _placed() -> Any:
    """The trace's `placed_at` on each of its rows, filled on PostgreSQL: the partition key
    of a partitioned store (not null there, and part of the primary key); SQLite leaves it
    null."""
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), nullable=True))


class StepRow(SQLModel, table=True):
    __tablename__ = "steps"
    # Every index costs each write: only those a query uses (revision 0008). The unique
    # (trace_id, seq) also serves every lookup by trace (detail, search, retention).
    __table_args__ = (
        sa.UniqueConstraint("trace_id", "seq", name="uq_steps_trace_seq"),
        # Retention keeps a tool set while any step still refers to it.
        sa.Index("ix_steps_tool_set", "tool_set"),
        # The random keys, each behind the step's key epoch (gateway.store.key_epochs): a
        # batch's inserts land in the newest epoch's small, cached subtree. Placement looks
        # continuation keys up and the key filter walks them at start-up from the index
        # alone; a step is found by any id it answered with (`find_step`, search) and by
        # `previous_response_id`.
        sa.Index("ix_steps_continuation_key", "key_epoch", "continuation_key"),
        sa.Index("ix_steps_response_id", "key_epoch", "response_id"),
        sa.Index("ix_steps_provider_request_id", "key_epoch", "provider_request_id"),
        # A request naming a provider-side conversation continues its newest step's trace.
        sa.Index("ix_steps_conversation_id", "key_epoch", "conversation_id"),
        # A request carrying a compaction item continues the trace of the step that made it.
        sa.Index("ix_steps_held_state", "key_epoch", "held_state"),
    )

    id: str = _id(primary_key=True)
    trace_id: str = Field(
        sa_column=sa.Column(
            sa.String(ID_LENGTH), sa.ForeignKey("traces.id", ondelete="CASCADE"), nullable=False
        )
    )
    seq: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    protocol: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    method: str = Field(sa_column=sa.Column(sa.String(16), nullable=False))
    path: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    model: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    stream: bool = Field(default=False, sa_column=sa.Column(sa.Boolean, nullable=False))
    http_status: int | None = Field(default=None, sa_column=sa.Column(sa.Integer))
    stop_reason: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    raw_stop_reason: str | None = Field(default=None, sa_column=sa.Column(sa.String(128)))
    prompt_tokens: int | None = _tokens(nullable=True)
    completion_tokens: int | None = _tokens(nullable=True)
    total_tokens: int | None = _tokens(nullable=True)
    cached_tokens: int | None = _tokens(nullable=True)
    reasoning_tokens: int | None = _tokens(nullable=True)
    cache_creation_tokens: int | None = _tokens(nullable=True)
    provider_request_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    response_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    started_at: datetime = _time()
    latency_ms: float | None = Field(default=None, sa_column=sa.Column(sa.Float))
    ttft_ms: float | None = Field(default=None, sa_column=sa.Column(sa.Float))
    error: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    continuation_key: str | None = _id(nullable=True)
    cost_nano: int | None = _tokens(nullable=True)
    cost_source: str | None = Field(default=None, sa_column=sa.Column(sa.String(16)))
    tool_ms: float | None = Field(default=None, sa_column=sa.Column(sa.Float))
    # The failed attempt (no answer, a cut stream) this step repeats.
    retry_of: str | None = _id(nullable=True)
    # What the request declared and asked for: its tools by content hash (a run re-sends the
    # same tools every step: stored once in tool_sets) and its parameters, redacted.
    tool_set: str | None = Field(default=None, sa_column=sa.Column(sa.String(64)))
    params: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    placed_at: datetime | None = _placed()
    # Facts of the provider's side beyond the columns (gateway.step.StepRecord.attrs).
    attrs: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    # The provider-side conversation the step belongs to (revision 0016).
    conversation_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    # The mark of the provider-held history its output holds (revision 0017).
    held_state: str | None = Field(default=None, sa_column=sa.Column(sa.String(64)))
    # Leads the indexes on random keys (gateway.store.key_epochs): 0 for steps stored
    # before revision 0013.
    key_epoch: int = _count()


class ToolSetRow(SQLModel, table=True):
    """One distinct list of declared tools, as the requests sent it (redacted)."""

    __tablename__ = "tool_sets"

    hash: str = Field(sa_column=sa.Column(sa.String(64), primary_key=True))
    tools: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False)
    )


_HAS_CALL_ID = sa.text("call_id IS NOT NULL")
_HAS_ARGS_KEY = sa.text("args_key IS NOT NULL")


class ItemRow(SQLModel, table=True):
    __tablename__ = "items"
    __table_args__ = (
        # Emitted calls by id (pairing, MCP joins, search) and the key filter's walk at
        # start-up, answered from the index alone; items without a call id are left out.
        # Behind the key epoch, as the steps' random keys (gateway.store.key_epochs).
        sa.Index(
            "ix_items_call_id_kind",
            "key_epoch",
            "call_id",
            "direction",
            "kind",
            sqlite_where=_HAS_CALL_ID,
            postgresql_where=_HAS_CALL_ID,
        ),
        # Output tool calls by their arguments' hash (MCP joins across processes); the
        # items without one (most of them) are left out.
        sa.Index(
            "ix_items_args_key",
            "key_epoch",
            "args_key",
            sqlite_where=_HAS_ARGS_KEY,
            postgresql_where=_HAS_ARGS_KEY,
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    # Indexed: a step's items (detail, checks against its output) and retention's deletes.
    step_id: str = Field(
        sa_column=sa.Column(
            sa.String(ID_LENGTH),
            sa.ForeignKey("steps.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        )
    )
    direction: str = Field(sa_column=sa.Column(sa.String(8), nullable=False))  # input | output
    position: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    kind: str = Field(sa_column=sa.Column(sa.String(32), nullable=False))
    role: str | None = Field(default=None, sa_column=sa.Column(sa.String(32)))
    text: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    call_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    tool_name: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    arguments: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    # A model tool call's canonical arguments, hashed: an MCP call recorded by another
    # gateway process finds the call it executes by it.
    args_key: str | None = Field(default=None, sa_column=sa.Column(sa.String(32)))
    is_error: bool | None = Field(default=None, sa_column=sa.Column(sa.Boolean))
    attrs: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(sa.JSON, nullable=False)
    )
    placed_at: datetime | None = _placed()
    # Leads the indexes on the item's random keys: its step's (gateway.store.key_epochs).
    key_epoch: int = _count()


class ViolationRow(SQLModel, table=True):
    __tablename__ = "violations"
    __table_args__ = (
        # The violations page: newest first, optionally of one kind.
        sa.Index("ix_violations_kind_created", "kind", "created_at", "id"),
        sa.Index("ix_violations_created", "created_at", "id"),
    )

    id: str = _id(primary_key=True)
    kind: str = Field(sa_column=sa.Column(sa.String(64), nullable=False))
    # Indexed: a trace's violations (detail, the list's `violation=` filter, retention).
    trace_id: str = Field(
        sa_column=sa.Column(
            sa.String(ID_LENGTH),
            sa.ForeignKey("traces.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        )
    )
    # No foreign key: a refusal's violations have no step.
    step_id: str | None = _id(nullable=True)
    call_id: str | None = Field(default=None, sa_column=sa.Column(sa.String(256)))
    detail: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    enforced: bool = Field(default=False, sa_column=sa.Column(sa.Boolean, nullable=False))
    created_at: datetime = _time()
    # A refused request's new input items (redacted), on the violation that refused it.
    items: list[dict[str, Any]] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    placed_at: datetime | None = _placed()


class TraceModelRow(SQLModel, table=True):
    """Each model a trace used: the list's `model=` filter seeks these by name."""

    __tablename__ = "trace_models"
    __table_args__ = (sa.Index("ix_trace_models_model", "model", "trace_id"),)

    trace_id: str = Field(
        sa_column=sa.Column(
            sa.String(ID_LENGTH),
            sa.ForeignKey("traces.id", ondelete="CASCADE"),
            primary_key=True,
        )
    )
    model: str = Field(sa_column=sa.Column(sa.String(256), primary_key=True))


class SessionRow(SQLModel, table=True):
    """One session's traces summed up, kept by the writer and by retention."""

    __tablename__ = "sessions"
    # The sessions list: newest activity first, with its keyset cursor.
    __table_args__ = (sa.Index("ix_sessions_activity", "last_activity", "session_id"),)

    session_id: str = Field(sa_column=sa.Column(sa.String(256), primary_key=True))
    trace_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    step_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    total_tokens: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    violation_count: int = Field(sa_column=sa.Column(sa.Integer, nullable=False))
    cost_nano: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    started_at: datetime = _time()
    last_activity: datetime = _time()


class MetaRow(SQLModel, table=True):
    __tablename__ = "meta"

    key: str = Field(sa_column=sa.Column(sa.String(64), primary_key=True))
    value: str = Field(sa_column=sa.Column(sa.Text, nullable=False))


TRACES: sa.Table = SQLModel.metadata.tables["traces"]
STEPS: sa.Table = SQLModel.metadata.tables["steps"]
ITEMS: sa.Table = SQLModel.metadata.tables["items"]
VIOLATIONS: sa.Table = SQLModel.metadata.tables["violations"]
META: sa.Table = SQLModel.metadata.tables["meta"]
TOOL_SETS: sa.Table = SQLModel.metadata.tables["tool_sets"]
TRACE_MODELS: sa.Table = SQLModel.metadata.tables["trace_models"]
SESSIONS: sa.Table = SQLModel.metadata.tables["sessions"]
