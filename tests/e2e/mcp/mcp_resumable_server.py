"""A resumable MCP server for the tests (the official SDK's MCPServer with an event store):
`python -m tests.e2e.mcp.mcp_resumable_server http PORT` serves Streamable HTTP at /mcp. Its tool
`answer_later` closes the call's stream mid-call, so the client resumes it with a GET
(`Last-Event-ID`), on which the result arrives."""

from __future__ import annotations

import asyncio
import itertools
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage

server = MCPServer("loopwatch-test-resumable", log_level="WARNING")


class MemoryEvents(EventStore):
    """Every event of every stream, in order, in memory."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(next(self._ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        found = [n for n, (event_id, _, _) in enumerate(self.events) if event_id == last_event_id]
        if not found:
            return None
        stream_id = self.events[found[0]][1]
        for event_id, stream, message in self.events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


@server.tool(description="Answer after the call's stream was closed and resumed.")
async def answer_later(text: str, ctx: Context) -> str:
    await ctx.close_sse_stream()
    await asyncio.sleep(0.5)  # the answer is stored while no stream is open
    return f"later: {text}"


if __name__ == "__main__":
    port = int(sys.argv[2])
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=port,
        event_store=MemoryEvents(),
        retry_interval=100,
    )
