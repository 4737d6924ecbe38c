"""The MCP server the official conformance suite's server scenarios expect (tools, resources,
prompts, logging, completions, sampling, elicitation, SSE resumption, DNS-rebinding
protection), written with the official SDK: `python -m tests.e2e.mcp.conformance_server PORT`
serves Streamable HTTP at /mcp."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    AudioContent,
    Completion,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    JSONRPCMessage,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

# A 1x1 PNG and a silent WAV: the smallest valid media the scenarios ask for.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
STEP_SECONDS = 0.05  # the pause the logging and progress scenarios ask for between messages

server = MCPServer("loopwatch-conformance", version="1.0.0", log_level="WARNING")
subscriptions: set[str] = set()


class MemoryEventStore(EventStore):
    """Every SSE event kept in order, so a client that reconnects with Last-Event-ID gets
    what it missed (the server-sse-polling scenario closes a stream mid-call)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events[int(last_event_id) :]:
            if stream_id == stream and message is not None:  # None: a priming event
                await send_callback(EventMessage(message, event_id))
        return stream


def _text_resource(uri: str, mime_type: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


# Tools


@server.tool(description="Returns a simple text response.")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="Returns an image.")
def test_image_content() -> list[ImageContent]:
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool(description="Returns audio.")
def test_audio_content() -> list[AudioContent]:
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@server.tool(description="Returns an embedded resource.")
def test_embedded_resource() -> list[EmbeddedResource]:
    text = "This is an embedded resource content."
    return [_text_resource("test://embedded-resource", "text/plain", text)]


@server.tool(description="Returns text, an image and an embedded resource.")
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        _text_resource(
            "test://mixed-content-resource",
            "application/json",
            json.dumps({"test": "data", "value": 123}),
        ),
    ]


@server.tool(description="Sends three log messages while it runs.")
async def test_tool_with_logging(ctx: Context) -> str:
    messages = ("Tool execution started", "Tool processing data", "Tool execution completed")
    for i, text in enumerate(messages):
        if i:
            await asyncio.sleep(STEP_SECONDS)
        await ctx.log("info", text)
    return "Tool with logging executed successfully"


@server.tool(description="Reports progress 0, 50 and 100 of 100.")
async def test_tool_with_progress(ctx: Context) -> str:
    for i, progress in enumerate((0, 50, 100)):
        if i:
            await asyncio.sleep(STEP_SECONDS)
        await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
    return "Tool with progress executed successfully"


@server.tool(description="Always fails.")
def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool(description="Asks the client's model to answer a prompt.")
async def test_sampling(prompt: str, ctx: Context) -> str:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    result = await ctx.session.create_message(
        messages=[message], max_tokens=100, related_request_id=ctx.request_id
    )
    content = result.content
    answer = content.text if isinstance(content, TextContent) else "(no text)"
    return f"LLM response: {answer}"


async def _elicit(ctx: Context, message: str, properties: dict[str, Any], **extra: Any) -> str:
    schema: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"action={result.action}, content={json.dumps(result.content)}"


@server.tool(description="Asks the user for a username and an email address.")
async def test_elicitation(message: str, ctx: Context) -> str:
    properties = {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }
    answer = await _elicit(ctx, message, properties, required=["username", "email"])
    return f"User response: {answer}"


@server.tool(description="Asks the user for fields of every primitive type, each with a default.")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    properties = {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    }
    answer = await _elicit(ctx, "Please provide user information", properties)
    return f"Elicitation completed: {answer}"


def _titled(prefix: str, *titles: str) -> list[dict[str, str]]:
    return [{"const": f"{prefix}{i}", "title": t} for i, t in enumerate(titles, start=1)]


@server.tool(description="Asks the user to choose with each kind of enum schema.")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    options = ["option1", "option2", "option3"]
    properties = {
        "untitledSingle": {"type": "string", "enum": options},
        "titledSingle": {"type": "string", "oneOf": _titled("value", "First Option", "Second")},
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": _titled("value", "First Choice", "Second Choice")},
        },
    }
    answer = await _elicit(ctx, "Please choose", properties)
    return f"Elicitation completed: {answer}"


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "", address: dict[str, str] | None = None) -> str:
    return f"{name} {address or {}}"


# Declared by hand: the keywords the scenario checks are not what a signature gives.
_schema_tool = server._tool_manager.get_tool("json_schema_2020_12_tool")
assert _schema_tool is not None
_schema_tool.parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@server.tool(description="Closes its SSE stream mid-call; the answer comes on the reconnection.")
async def test_reconnection(ctx: Context) -> str:
    await ctx.log("info", "Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)  # the client reconnects after the 100 ms retry interval
    await ctx.log("info", "After reconnect")
    return "Reconnection test completed"


# Resources


@server.resource("test://static-text", description="A static text resource.")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", description="A PNG image.", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource(
    "test://template/{id}/data", description="Data of one id.", mime_type="application/json"
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", description="A resource one can subscribe to.")
def watched() -> str:
    return "Watched resource content"


# Prompts


@server.prompt(description="A prompt without arguments.")
def test_simple_prompt() -> list[Message]:
    return [UserMessage("This is a simple prompt for testing.")]


@server.prompt(description="A prompt with two arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@server.prompt(description="A prompt embedding the resource it is given.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    text = "Embedded resource content for testing."
    return [
        UserMessage(_text_resource(resourceUri, "text/plain", text)),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt(description="A prompt with an image.")
def test_prompt_with_image() -> list[Message]:
    return [
        UserMessage(ImageContent(type="image", data=PNG, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion:
    values = [v for v in ("paris", "park", "party") if v.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


# Subscriptions and the log level: requests the high-level server has no decorator for.


async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    subscriptions.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    subscriptions.discard(str(params.uri))
    return EmptyResult()


async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


lowlevel = server._lowlevel_server
lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


class LoopbackHostOnly:
    """DNS-rebinding protection as the suite's reference server has it: a request whose Host
    is not a loopback name (any port) is refused with 403; any Origin is served. The SDK's
    own check refuses foreign Origins too, and a gateway passes Origin on: that would refuse
    a rebinding page's request behind a gateway that does not check it itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Headers(scope=scope).get("host", "")
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 or "]:" in host else host
            if name.lower() not in LOOPBACK_NAMES:
                error = {"code": -32000, "message": f"Invalid Host: {host}"}
                body = {"jsonrpc": "2.0", "error": error, "id": None}
                await JSONResponse(body, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def main(port: int) -> None:
    app = server.streamable_http_app(
        event_store=MemoryEventStore(),
        retry_interval=100,  # ms: the SSE priming event's reconnection delay
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    uvicorn.run(LoopbackHostOnly(app), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[2]))  # argv: http PORT, as the harness starts every test server
