"""Tables of the MCP side: executions, other methods, each server's tool list, violations.

No foreign keys to traces: an execution may arrive before its trace is stored, or join none.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import SQLModel

from gateway.store.models import ID_LENGTH, UTCDateTime

_meta = SQLModel.metadata

MCP_EXECUTIONS = sa.Table(
    "mcp_executions",
    _meta,
    sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
    sa.Column("trace_id", sa.String(ID_LENGTH), nullable=True, index=True),
    sa.Column("call_id", sa.String(256), nullable=True, index=True),
    sa.Column("join", sa.String(16), nullable=False),
    sa.Column("server", sa.String(64), nullable=False),
    sa.Column("tool", sa.String(256), nullable=False),
    sa.Column("arguments", sa.JSON, nullable=True),
    sa.Column("result", sa.JSON, nullable=True),
    sa.Column("is_error", sa.Boolean, nullable=True),
    sa.Column("error", sa.JSON, nullable=True),
    sa.Column("outcome", sa.String(16), nullable=True),
    sa.Column("duration_ms", sa.Float, nullable=True),
    sa.Column("protocol_version", sa.String(32), nullable=True),
    sa.Column("session_id", sa.String(256), nullable=True),
    sa.Column("rpc_id", sa.Text, nullable=True),
    sa.Column("delivery", sa.String(16), nullable=True),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Index("ix_mcp_executions_join_started", "join", "started_at"),
)

MCP_METHODS = sa.Table(
    "mcp_methods",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("server", sa.String(64), nullable=False, index=True),
    sa.Column("method", sa.String(128), nullable=False),
    sa.Column("trace_id", sa.String(ID_LENGTH), nullable=True, index=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("duration_ms", sa.Float, nullable=True),
    sa.Column("protocol_version", sa.String(32), nullable=True),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Index("ix_mcp_methods_server_started", "server", "started_at"),
)

MCP_TOOLS = sa.Table(
    "mcp_tools",
    _meta,
    sa.Column("server", sa.String(64), primary_key=True),
    sa.Column("tools", sa.JSON, nullable=False),
    sa.Column("seen_at", UTCDateTime(), nullable=False),
)

MCP_VIOLATIONS = sa.Table(
    "mcp_violations",
    _meta,
    sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("trace_id", sa.String(ID_LENGTH), nullable=True, index=True),
    sa.Column("execution_id", sa.String(ID_LENGTH), nullable=True, index=True),
    sa.Column("call_id", sa.String(256), nullable=True),
    sa.Column("server", sa.String(64), nullable=False),
    sa.Column("tool", sa.String(256), nullable=True),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("enforced", sa.Boolean, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)
