"""The server's JSON-RPC surface, whatever carries it: `initialize` (the 2024-11-05 to
2025-11-25 handshake), `server/discover` (2026-07-28, no handshake, the version in each
request's `_meta`), `ping`, `tools/list`, `tools/call`. A message in, its answer out (None for
a notification); the tools run through `run`, which the transport gives."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.store.read.deadline import ReadTimedOut
from gateway.ui.mcp_server.answers import Answer, NoSuchTrace
from gateway.ui.mcp_server.catalog import TOOLS, BadArguments, checked

log = logging.getLogger(__name__)

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
VERSIONS = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)
STRUCTURED_SINCE = "2025-06-18"  # the first version whose tool results carry structuredContent
VERSION_META = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "loopwatch-traces", "title": "Loopwatch traces"}
INSTRUCTIONS = (
    "Read-only access to the agent runs this Loopwatch gateway recorded. To learn why a run "
    "failed, call explain_run (no id: the latest run), then get_trace for its steps."
)

PARSE_ERROR, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_VERSION = -32022

Run = Callable[[str, dict[str, Any]], Awaitable[Answer]]


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def error(message_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": message_id, "error": body}


class Dispatcher:
    """One connection's server: `version` is what the transport already knows (the stdio
    handshake's answer, an HTTP request's `MCP-Protocol-Version` header)."""

    def __init__(self, run: Run, server_version: str, version: str | None = None) -> None:
        self.run = run
        self.info = SERVER_INFO | {"version": server_version}
        self.version = version

    async def answer(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method, message_id = message.get("method"), message.get("id")
        if not isinstance(method, str):
            return None if "result" in message or "error" in message else _invalid(message_id)
        if "id" not in message:
            return None  # a notification (notifications/initialized, cancelled): nothing owed
        params = message.get("params") or {}
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            result = await self._result(method, params)
        except RpcError as exc:
            return error(message_id, exc.code, exc.message, exc.data)
        except Exception as exc:  # the store failed: the client gets an answer all the same
            log.exception("the trace MCP server failed on %s", method)
            return error(message_id, INTERNAL_ERROR, f"internal error ({type(exc).__name__})")
        return {"jsonrpc": "2.0", "id": message_id, "result": result}

    async def _result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        version = self._version(params)
        if method == "initialize":
            return self._initialized(params)
        if method == "server/discover":
            return self._modern(version, self._capabilities() | {"supportedVersions": VERSIONS})
        if method == "ping":
            return self._modern(version, {})
        if method == "tools/list":
            return self._modern(version, {"tools": TOOLS})
        if method == "tools/call":
            return self._modern(version, await self._call(params, version))
        raise RpcError(NO_METHOD, f"method not found: {method}")

    def _version(self, params: dict[str, Any]) -> str | None:
        meta = params.get("_meta")
        named = meta.get(VERSION_META) if isinstance(meta, dict) else None
        version = named if isinstance(named, str) else self.version
        if version is not None and version not in VERSIONS:
            supported = {"supported": list(VERSIONS), "requested": version}
            raise RpcError(
                UNSUPPORTED_VERSION, f"unsupported protocol version {version}", supported
            )
        return version

    def _capabilities(self) -> dict[str, Any]:
        return {
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": self.info,
            "instructions": INSTRUCTIONS,
        }

    def _initialized(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        self.version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        return self._capabilities() | {"protocolVersion": self.version}

    @staticmethod
    def _modern(version: str | None, result: dict[str, Any]) -> dict[str, Any]:
        """2026-07-28 results say they are complete and how long they may be cached."""
        if version not in MODERN_VERSIONS:
            return result
        return result | {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

    async def _call(self, params: dict[str, Any], version: str | None) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str) or name not in {tool["name"] for tool in TOOLS}:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {name}")
        try:
            arguments = checked(name, params.get("arguments"))
        except BadArguments as exc:
            raise RpcError(INVALID_PARAMS, f"invalid arguments for {name}: {exc}") from None
        try:
            text, structured = await self.run(name, arguments)
        except (NoSuchTrace, ReadTimedOut) as exc:  # a model can act on these: tool errors
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if version is None or version >= STRUCTURED_SINCE:
            result["structuredContent"] = structured
        return result


def _invalid(message_id: Any) -> dict[str, Any]:
    return error(message_id, INVALID_REQUEST, "a request needs a method")
