"""Anthropic content blocks the provider ran itself, typed the same in an answer and in its echo.

`server_tool_use` (web search and fetch, code execution, tool search) and the MCP connector's
`mcp_tool_use` are tool calls with `executed_by: provider`; every `*_tool_result` block other
than the client's `tool_result` (`web_search_tool_result`, `mcp_tool_result`, future ones) is
the result of one. Their text is a short account of the outcome (titles and URLs found,
stdout, an error code), never encrypted content. A client `tool_use` made by provider-run
code (programmatic tool calling) names that code's call in `attrs.caller`.
"""

from __future__ import annotations

from typing import Any

from gateway.items import EXECUTED_BY, PROVIDER, Item, ItemKind
from gateway.opaque import Digests
from gateway.protocols.json_values import as_dict, as_int, as_str, compact
from gateway.protocols.wire_shapes.keys import OPAQUE

_CLIENT_CALL = "tool_use"
_CLIENT_RESULT = "tool_result"
_CALL_SUFFIX = "_tool_use"
_RESULT_SUFFIX = "_tool_result"
# A server tool's `tool_type` is its name, but the tool-search variants share their
# result's: `tool_search_tool_result` answers both.
_SERVER_TOOL_TYPES = {
    "tool_search_tool_regex": "tool_search",
    "tool_search_tool_bm25": "tool_search",
}
# Every `tool_type` given (the server tools of anthropic.types.ServerToolUseBlock and
# BetaServerToolUseBlock, and the MCP connector's); another is typed too, counted `other`.
TOOL_TYPES = frozenset(
    {
        "advisor",
        "web_search",
        "web_fetch",
        "code_execution",
        "bash_code_execution",
        "text_editor_code_execution",
        "tool_search",
        "mcp",
    }
)


def is_provider_call(kind: str | None) -> bool:
    return kind is not None and kind.endswith(_CALL_SUFFIX) and kind != _CLIENT_CALL


def is_provider_result(kind: str | None) -> bool:
    return kind is not None and kind.endswith(_RESULT_SUFFIX) and kind != _CLIENT_RESULT


def caller_attrs(block: dict[str, Any]) -> dict[str, Any]:
    """`caller` of a block made by provider-run code: the id of that code's call."""
    caller = as_dict(block.get("caller"))
    tool_id = as_str(caller.get("tool_id"))
    if tool_id is None or caller.get("type") == "direct":
        return {}
    return {"caller": tool_id, "caller_type": as_str(caller.get("type"))}


def provider_call(role: str, block: dict[str, Any], arguments: str, attrs: dict[str, Any]) -> Item:
    """A provider-run call; `arguments` its input as JSON text (whole, or streamed)."""
    kind = as_str(block.get("type")) or ""
    name = as_str(block.get("name"))
    # A server tool is named by what it does (`web_search`); the connector's by the MCP tool.
    if kind == "server_tool_use":
        tool_type = _SERVER_TOOL_TYPES.get(name or "", name)
    else:
        tool_type = kind.removesuffix(_CALL_SUFFIX)
    extra: dict[str, Any] = {EXECUTED_BY: PROVIDER, "tool_type": tool_type or "unknown"}
    server = as_str(block.get("server_name"))
    if server is not None:
        extra["server"] = server
    return Item(
        ItemKind.TOOL_CALL,
        role=role,
        call_id=as_str(block.get("id")),
        tool_name=name,
        arguments=arguments,
        attrs={**attrs, **extra, **caller_attrs(block)},
    )


def whole_provider_call(role: str, block: dict[str, Any], attrs: dict[str, Any]) -> Item:
    arguments = block.get("input")
    return provider_call(
        role, block, compact(arguments if isinstance(arguments, dict) else {}), attrs
    )


def provider_result(role: str, block: dict[str, Any], attrs: dict[str, Any]) -> Item:
    kind = as_str(block.get("type")) or ""
    text, failed, facts = _outcome(block.get("content"))
    if block.get("is_error") is True:
        failed = True
    extra = {EXECUTED_BY: PROVIDER, "tool_type": kind.removesuffix(_RESULT_SUFFIX), **facts}
    return Item(
        ItemKind.TOOL_RESULT,
        role=role,
        text=text,
        call_id=as_str(block.get("tool_use_id")),
        is_error=failed,
        attrs={**attrs, **extra, **caller_attrs(block)},
    )


def _outcome(content: Any) -> tuple[str | None, bool, dict[str, Any]]:
    """(text, failed, facts) of a provider-run result's `content`."""
    if isinstance(content, str):
        return content, False, {}
    if isinstance(content, list):
        lines = [line for line in map(_line, content) if line]
        return ("\n".join(lines) or None), False, {"results": len(content)}
    body = as_dict(content)
    kind = as_str(body.get("type")) or ""
    if kind.endswith("_error"):
        return as_str(body.get("error_code")) or kind, True, {}
    facts: dict[str, Any] = {}
    code = as_int(body.get("return_code"))
    if code is not None:
        facts["return_code"] = code
    if "stdout" in body or "stderr" in body:
        streams = [as_str(body.get("stdout")) or "", as_str(body.get("stderr")) or ""]
        return "\n".join(s for s in streams if s) or None, bool(code), facts
    references = body.get("tool_references")
    if isinstance(references, list):
        names = [as_str(as_dict(r).get("tool_name")) for r in references]
        return "\n".join(n for n in names if n) or None, False, facts
    return _line(body) or None, False, facts


def _line(part: Any) -> str:
    """One result entry as a line: a text block's text, else its title and URL."""
    part = as_dict(part)
    text = as_str(part.get("text"))
    if text is not None:
        return text
    return " ".join(s for s in (as_str(part.get("title")), as_str(part.get("url"))) if s)


def kept(digests: Digests, field: str, payload: Any) -> dict[str, Any]:
    """`{OPAQUE: {field: payload}}` for a thinking block's payload when payloads are kept
    (`keep_opaque_reasoning`), else nothing."""
    if digests.keep and isinstance(payload, str) and payload:
        return {OPAQUE: {field: payload}}
    return {}
