"""The tools a Responses request declares: top-level `tools`, `additional_tools` input items,
the tools a client-run `tool_search_output` loaded, and the functions inside namespaces;
and the built-in tools the client runs (`local_shell`, `shell`, `apply_patch`, a client-run
`tool_search`).

A namespaced tool is called by its own name with the namespace beside it (`namespace` on
the call item): both sides name it `namespace.name`.
"""

from __future__ import annotations

from typing import Any

# Calls of built-in tools the client runs, by item type: the tool type that declares them
# (the name they are recorded under) and the field holding what the call asks. A shell call
# in a hosted container and a tool search the server executes are the provider's instead
# (openai_responses_hosted).
BUILTIN_CALLS = {
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
    "tool_search_call": ("tool_search", "arguments"),
}
BUILTIN_RESULTS = frozenset(
    {
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "tool_search_output",
    }
)
_BUILTIN_TOOLS = frozenset(name for name, _ in BUILTIN_CALLS.values())

# Input items whose `tools` declare tools for the rest of the conversation.
_TOOL_CONTAINERS = frozenset({"additional_tools", "tool_search_output"})
_DECLARING = "additional_tools"  # the one a client declares its own tools in
_MAX_DEPTH = 8  # namespaces nest rarely; a deeper one is not walked


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def qualified(name: str | None, namespace: Any) -> str | None:
    """The name a call of a namespaced tool is recorded and judged under."""
    if name and isinstance(namespace, str) and namespace:
        return f"{namespace}.{name}"
    return name


def declared_tools(body: dict[str, Any], entries: list[Any]) -> dict[str, Any] | None:
    """name → JSON Schema of each declared function (None: free-form custom tools).

    None when the declaration is not known here: a stored `prompt` may hold tools, and a
    continued response (`previous_response_id`) may have received them in an earlier
    input's `additional_tools` when this request declares none itself.
    """
    if body.get("prompt") is not None:
        return None
    declared: dict[str, Any] = {}
    _collect(body.get("tools"), None, declared, 0)
    containers = False
    for entry in entries:
        if isinstance(entry, dict) and _text(entry.get("type")) in _TOOL_CONTAINERS:
            containers = True
            _collect(entry.get("tools"), None, declared, 0)
    if body.get("previous_response_id") is not None and not containers and not declared:
        return None
    return declared


def contained_tools(body: dict[str, Any]) -> list[Any] | None:
    """The `tools` of the one `additional_tools` input item, when the request declares its
    own tools there alone: no top-level `tools`, no second such item (Codex). Tools a
    search loaded (`tool_search_output`) are an answer's, not a declaration."""
    entries = body.get("input")
    if body.get("tools") or not isinstance(entries, list):
        return None
    found: list[Any] | None = None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("type") == _DECLARING:
            tools = entry.get("tools")
            if found is not None or not isinstance(tools, list):
                return None
            found = tools
    return found or None


def _collect(tools: Any, namespace: str | None, declared: dict[str, Any], depth: int) -> None:
    if not isinstance(tools, list) or depth > _MAX_DEPTH:
        return
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind, name = _text(tool.get("type")), tool.get("name")
        if kind in _BUILTIN_TOOLS and namespace is None:
            declared[kind] = None  # its calls are typed by the provider, not by a schema
            continue
        if not isinstance(name, str) or not name:
            continue
        if kind == "namespace":
            _collect(tool.get("tools"), qualified(name, namespace), declared, depth + 1)
        elif kind == "function":
            declared[qualified(name, namespace) or name] = tool.get("parameters")
        elif kind == "custom":
            # Free-form input (a grammar or plain text): no JSON Schema to judge it by.
            declared[qualified(name, namespace) or name] = None
