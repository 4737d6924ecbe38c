"""`loopwatch mcp-server`: the trace tools over stdio, one JSON-RPC message a line in and out.
Nothing but messages goes to standard output; logs go to standard error."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from gateway.config import Settings
from gateway.ui.mcp_server import answers
from gateway.ui.mcp_server.rpc import PARSE_ERROR, Dispatcher, error


async def serve(engine: Engine, settings: Settings, server_version: str) -> None:
    read = answers.Reader(
        engine, settings.trace_idle_seconds, settings.search_timeout_s, lambda: datetime.now(UTC)
    )

    async def run(name: str, arguments: dict[str, Any]) -> answers.Answer:
        return await asyncio.to_thread(answers.TOOLS[name], read, arguments)

    dispatcher = Dispatcher(run, server_version)
    while line := await asyncio.to_thread(sys.stdin.buffer.readline):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            _write(error(None, PARSE_ERROR, "the line is not JSON"))
            continue
        if isinstance(message, list):
            found = [await dispatcher.answer(m) for m in message]
            answered: Any = [a for a in found if a is not None] or None
        else:
            answered = await dispatcher.answer(message)
        if answered is not None:
            _write(answered)


def _write(message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
