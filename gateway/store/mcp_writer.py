"""Stores MCP records from a thread of its own: the proxy hands records over without waiting
(a full queue drops and counts), the thread redacts them and writes them in batches."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway import jsoncodec
from gateway.mcp.records import Execution, McpViolation, MethodCall, Record, ToolList
from gateway.redaction.redactor import Redactor
from gateway.store.engine import write_connection
from gateway.store.mcp_tables import MCP_EXECUTIONS, MCP_METHODS, MCP_TOOLS, MCP_VIOLATIONS
from gateway.store.writer import merge_mcp_activity

log = logging.getLogger(__name__)

QUEUE_SIZE = 10_000
BATCH = 200
# A batch waits this long for company: one transaction per burst, not per record.
GATHER_SECONDS = 0.05
_STOP = object()


class McpWriter:
    def __init__(
        self,
        engine: Engine,
        redactor: Redactor,
        *,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        self._engine = engine
        self._redactor = redactor
        self._queue: queue.Queue[object] = queue.Queue(QUEUE_SIZE)
        self._on_drop = on_drop
        self._done = threading.Condition()
        self._submitted = 0
        self._written = 0
        self._thread = threading.Thread(target=self._run, name="mcp-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, records: list[Record]) -> None:
        """Never blocks: a record that does not fit is dropped (and counted)."""
        for record in records:
            try:
                self._queue.put_nowait(record)
                self._submitted += 1
            except queue.Full:
                log.warning("MCP record dropped: the writer queue is full")
                if self._on_drop is not None:
                    self._on_drop()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted so far is stored (blocking: call off the loop)."""
        wanted = self._submitted
        with self._done:
            return self._done.wait_for(lambda: self._written >= wanted, timeout)

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            if batch[0] is not _STOP:
                time.sleep(GATHER_SECONDS)
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP in batch
            records = [r for r in batch if r is not _STOP]
            self._store(records)
            with self._done:
                self._written += len(records)
                self._done.notify_all()
            if stop:
                return

    def _store(self, records: list[object]) -> None:
        """One transaction; when it fails, each record on its own, so one bad record does
        not take the others with it."""
        try:
            with write_connection(self._engine) as conn, conn.begin():
                # Trace rows first, in trace id order (as the step writer locks them).
                merge_mcp_activity(conn, _activity(records))
                self._write(conn, records)
            return
        except Exception:
            if len(records) == 1:
                log.exception("storing an MCP record failed; it is dropped")
                return
        for record in records:
            self._store([record])

    def _write(self, conn: Connection, records: list[object]) -> None:
        """Each table's rows in one statement (executemany): the thread holds the
        interpreter as briefly as it can, so the proxy's requests do not wait for it."""
        latest = {r.id: r for r in records if isinstance(r, Execution)}  # the newest wins
        if latest:
            self._executions(conn, list(latest.values()))
        methods = [_method_row(r) for r in records if isinstance(r, MethodCall)]
        if methods:
            conn.execute(sa.insert(MCP_METHODS), methods)
        violations = [self._violation_row(r) for r in records if isinstance(r, McpViolation)]
        if violations:
            conn.execute(sa.insert(MCP_VIOLATIONS), violations)
        for record in records:
            if isinstance(record, ToolList):
                self._tool_list(conn, record)

    def _executions(self, conn: Connection, executions: list[Execution]) -> None:
        ids = [e.id for e in executions]
        query = sa.select(MCP_EXECUTIONS.c.id).where(MCP_EXECUTIONS.c.id.in_(ids))
        stored = set(conn.scalars(query))
        fresh = [{"id": e.id, **self._execution_row(e)} for e in executions if e.id not in stored]
        if fresh:
            conn.execute(sa.insert(MCP_EXECUTIONS), fresh)
        known = [{"_id": e.id, **self._execution_row(e)} for e in executions if e.id in stored]
        if known:
            where = MCP_EXECUTIONS.c.id == sa.bindparam("_id")
            conn.execute(sa.update(MCP_EXECUTIONS).where(where), known)

    def _violation_row(self, record: McpViolation) -> dict[str, Any]:
        return {
            "id": record.id,
            "kind": record.kind,
            "trace_id": record.trace_id,
            "execution_id": record.execution_id,
            "call_id": record.call_id,
            "server": record.server,
            "tool": record.tool,
            "detail": self._redactor.redact_text(record.detail),
            "enforced": record.enforced,
            "created_at": record.created_at,
        }

    def _execution_row(self, e: Execution) -> dict[str, Any]:
        redact = self._redactor.redact_value
        return {
            "trace_id": e.trace_id,
            "call_id": e.call_id,
            "join": e.join,
            "server": e.server,
            "tool": e.tool[:256],
            "arguments": redact(e.arguments),
            "result": redact(e.result),
            "is_error": e.is_error,
            "error": redact(e.error),
            "outcome": e.outcome,
            "duration_ms": e.duration_ms,
            "protocol_version": e.protocol_version,
            "session_id": None
            if e.session_id is None
            else self._redactor.redact_text(e.session_id),
            "rpc_id": None if e.rpc_id is None else jsoncodec.dumps_text(e.rpc_id),
            "delivery": e.delivery,
            "started_at": e.started_at,
        }

    def _tool_list(self, conn: Connection, record: ToolList) -> None:
        values = {"tools": record.tools, "seen_at": record.seen_at}
        done = conn.execute(
            sa.update(MCP_TOOLS).where(MCP_TOOLS.c.server == record.server).values(**values)
        )
        if done.rowcount == 0:
            conn.execute(sa.insert(MCP_TOOLS).values(server=record.server, **values))


def _activity(records: list[object]) -> list[tuple[str, datetime, int]]:
    """The runs these records belong to: an execution makes its run visible, a violation
    counts on its run's `violation_count`."""
    activity: list[tuple[str, datetime, int]] = []
    for record in records:
        if isinstance(record, Execution) and record.trace_id is not None:
            activity.append((record.trace_id, record.started_at, 0))
        elif isinstance(record, McpViolation) and record.trace_id is not None:
            activity.append((record.trace_id, record.created_at, 1))
    return activity


def _method_row(record: MethodCall) -> dict[str, Any]:
    return {
        "server": record.server,
        "method": record.method[:128],
        "trace_id": record.trace_id,
        "outcome": record.outcome,
        "duration_ms": record.duration_ms,
        "protocol_version": record.protocol_version,
        "started_at": record.started_at,
    }
