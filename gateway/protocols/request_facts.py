"""What a request declared and asked for beside its conversation: the tools as it sent them
and its parameters (every other top-level field: model, temperature, max tokens, tool
choice, reasoning effort, …), for the step's record. Cheap: no deep copy, no
serialization; both read-only at the top, as the frozen record keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# Per protocol, the fields that are the conversation or the tools, recorded apart (as items
# and as the tool set); every other top-level field is a parameter.
NOT_PARAMS: dict[str, frozenset[str]] = {
    "chat": frozenset({"messages", "tools", "functions"}),
    "responses": frozenset({"input", "tools", "instructions"}),
    "messages": frozenset({"messages", "tools", "system"}),
}
# The tool fields per protocol, first present wins (`functions`: Chat's legacy form).
TOOL_FIELDS: dict[str, tuple[str, ...]] = {
    "chat": ("tools", "functions"),
    "responses": ("tools",),
    "messages": ("tools",),
}


def declared_tools(protocol: str, body: Any) -> tuple[Any, ...] | None:
    """The request's tool declarations as sent (function, custom and hosted tools alike);
    None when it declares none."""
    if not isinstance(body, dict):
        return None
    for name in TOOL_FIELDS.get(protocol, ()):
        tools = body.get(name)
        if isinstance(tools, list) and tools:
            return tuple(tools)
    return None


def request_params(protocol: str, body: Any) -> Mapping[str, Any] | None:
    """Every top-level field but the conversation and the tools; None for a body that is
    not an object or a protocol this module does not know."""
    skip = NOT_PARAMS.get(protocol)
    if skip is None or not isinstance(body, dict):
        return None
    return MappingProxyType({key: value for key, value in body.items() if key not in skip})
