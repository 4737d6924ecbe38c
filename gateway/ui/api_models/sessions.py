"""Sessions (runs grouped by the client's session id) with their counts and cost."""

from __future__ import annotations

from gateway.ui.api_models.common import ApiModel, Cursor, Timestamp


class Session(ApiModel):
    session_id: str
    trace_count: int
    cost_usd: float | None
    last_activity: Timestamp
    started_at: Timestamp


class SessionList(ApiModel):
    sessions: list[Session]
    next_cursor: Cursor
