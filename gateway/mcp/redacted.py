"""MCP records as they may be stored: arguments, results, errors, session ids and violation
details redacted. Runs where steps are redacted (the recorder for storage, the redacting
thread for exporters: sinks.redacted), never on the hot path."""

from __future__ import annotations

from dataclasses import replace

from gateway.mcp.records import Execution, McpViolation, Record
from gateway.redaction.redactor import Redactor


def redact_record(redactor: Redactor, record: Record) -> Record:
    """A redacted copy; a record with nothing free-form to redact is returned as it is."""
    if isinstance(record, Execution):
        redact = redactor.redact_value
        session = record.session_id
        return replace(
            record,
            arguments=redact(record.arguments),
            result=redact(record.result),
            error=redact(record.error),
            session_id=None if session is None else redactor.redact_text(session),
        )
    if isinstance(record, McpViolation):
        return replace(record, detail=redactor.redact_text(record.detail))
    return record


def redact_exported(redactor: Redactor, record: Execution | McpViolation) -> Record:
    """What exporters get: the stored redaction, and the client's and server's ids and
    names an exporter shows beside it (call id, tool, JSON-RPC id, protocol version)."""
    redacted = redact_record(redactor, record)
    text = redactor.redact_text
    call_id = None if record.call_id is None else text(record.call_id)
    if isinstance(redacted, McpViolation):
        return replace(redacted, call_id=call_id)
    assert isinstance(redacted, Execution)
    rpc_id = redacted.rpc_id
    version = redacted.protocol_version
    return replace(
        redacted,
        call_id=call_id,
        tool=text(redacted.tool),
        rpc_id=text(rpc_id) if isinstance(rpc_id, str) else rpc_id,
        protocol_version=None if version is None else text(version),
    )
