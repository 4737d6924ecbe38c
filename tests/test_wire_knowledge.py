"""Wire knowledge only in adapters: outside gateway/protocols/ no module branches on a wire
protocol's name or spells a provider's wire field; what the rest of the gateway needs of the
wire is a field or a method of the protocol's adapter, so a new protocol is one module there
plus one line in its registry.
"""

from __future__ import annotations

import ast
import typing
from collections.abc import Iterator
from pathlib import Path

from gateway.config import Route
from gateway.protocols.registry import ADAPTERS, PASSTHROUGH

GATEWAY = Path(__file__).resolve().parents[1] / "gateway"
PROTOCOLS = GATEWAY / "protocols"
# The demo's agents and fake provider are the client and the provider of a demo run: they
# speak the wire from outside the gateway, as a real SDK and a real provider do.
SPEAKERS = (GATEWAY / "demo",)
# Route.protocol's settings validation names the protocols: config.py is layer 0, below
# the registry; `test_route_protocols_are_the_registrys` holds the two together.
LISTS_ALLOWED = (GATEWAY / "config.py",)

# The protocols' names (as settings and records spell them, and as their modules do) and
# the provider families they stand for.
PROTOCOL_NAMES = frozenset(
    {*ADAPTERS, "openai_chat", "openai_responses", "anthropic_messages", "openai", "anthropic"}
)
# Fields, event types and headers of the providers' wire formats. Not in the list: names
# the gateway's own vocabulary shares with a wire (items' `tool_result`, stop reason
# `tool_calls`, usage's `prompt_tokens`), the OpenTelemetry GenAI conventions' (`content`,
# `finish_reason`, `system`), MCP's (`tools`, `arguments`) and generic ones (`user`).
WIRE_FIELDS = frozenset(
    {
        # request bodies
        "stream_options",
        "include_usage",
        "max_completion_tokens",
        "max_output_tokens",
        "previous_response_id",
        "previous_message_id",
        "safety_identifier",
        "tool_choice",
        "parallel_tool_calls",
        "tool_call_id",
        "tool_use",
        "tool_use_id",
        "function_call",
        "function_call_output",
        "item_reference",
        "budget_tokens",
        "user_id",
        # responses and stream events
        "choices",
        "message_start",
        "message_delta",
        "content_block_start",
        "content_block_delta",
        "response.completed",
        "response.output_text.delta",
        # WebSocket frames
        "response.create",
        "stream_id",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "ephemeral_1h_input_tokens",
        "server_tool_use",
        "web_search_requests",
        "web_fetch_requests",
        "stop_details",
        "fallback_message",
        # headers
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "openai-organization",
        "x-api-key",
        "api-key",
        "x-request-id",
        "request-id",
        "apim-request-id",
        "x-ms-request-id",
        "cf-ray",
    }
)


def _modules() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(GATEWAY.rglob("*.py")):
        if path.is_relative_to(PROTOCOLS) or any(path.is_relative_to(s) for s in SPEAKERS):
            continue
        name = str(path.relative_to(GATEWAY.parent))
        yield name, ast.parse(path.read_text(encoding="utf-8"), name)


def _constant(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in PROTOCOL_NAMES else []
    return []


def _names(node: ast.AST) -> list[str]:
    """The protocol names a node spells: a string constant, or the members of a literal
    tuple, list or set of them (not of one nested in it: a table's rows are no list)."""
    if isinstance(node, ast.Constant):
        return _constant(node)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [name for element in node.elts for name in _constant(element)]
    return []


def _branches(node: ast.AST) -> list[str]:
    """Protocol names a node compares, keys, looks up, matches or gathers in a collection."""
    if isinstance(node, ast.Compare):
        return [name for side in (node.left, *node.comparators) for name in _names(side)]
    if isinstance(node, ast.Dict):
        return [name for key in node.keys if key is not None for name in _names(key)]
    if isinstance(node, ast.Subscript):  # `table["chat"]`, `table["a" if x else "b"]`
        return [name for part in ast.walk(node.slice) for name in _constant(part)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):  # `table.get("chat")`
        return _constant(node.args[0]) if node.func.attr == "get" and node.args else []
    if isinstance(node, ast.MatchValue):
        return _names(node.value)
    if isinstance(node, ast.Set):
        return _names(node)
    if isinstance(node, ast.Tuple | ast.List):
        # One name alone is a label (the GenAI operation `chat`); two are a protocol list.
        found = _names(node)
        return found if len(found) > 1 else []
    return []


def test_no_module_outside_protocols_branches_on_a_protocol_name() -> None:
    found = sorted(
        f"{name}:{getattr(node, 'lineno', '?')}: {', '.join(names)}"
        for name, tree in _modules()
        if not any((GATEWAY.parent / name).samefile(allowed) for allowed in LISTS_ALLOWED)
        for node in ast.walk(tree)
        if (names := _branches(node))
    )
    assert not found, "ask the protocol's adapter (gateway/protocols/) instead:\n" + "\n".join(
        found
    )


def test_no_module_outside_protocols_spells_a_wire_field() -> None:
    found = sorted(
        f"{name}:{node.lineno}: {node.value!r}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.lower() in WIRE_FIELDS
    )
    assert not found, "read it in the protocol's adapter (gateway/protocols/):\n" + "\n".join(found)


def test_route_protocols_are_the_registrys() -> None:
    """The one place allowed to list the protocols lists the registry's, and passthrough."""
    listed = set(typing.get_args(Route.model_fields["protocol"].annotation))
    assert listed == {*ADAPTERS, PASSTHROUGH.protocol}


def test_the_scan_sees_what_it_forbids() -> None:
    """The scan itself: a branch, a key, lookups, a protocol list and a case are found."""
    source = (
        'if p == "messages": pass\n'
        'x = {"chat": 1}\n'
        'y = table["responses"], table.get("chat"), t["messages" if a else "chat"]\n'
        'z = ("chat", "responses")\n'
        'match p:\n    case "messages": pass\n'
    )
    hits = [n for node in ast.walk(ast.parse(source)) for n in _branches(node)]
    assert sorted(hits) == [*["chat"] * 4, *["messages"] * 3, *["responses"] * 2]
