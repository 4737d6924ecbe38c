"""MCP records as they may be stored: arguments, results, errors, session ids and violation
details redacted. Runs where steps are redacted (the recorder), never on the hot path."""

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
