"""What a request declared and asked for beside its conversation: the tools as it sent them
and its parameters (every other top-level field: model, temperature, max tokens, tool
choice, reasoning effort, …), for the step's record. Cheap: no deep copy, no
serialization; both read-only at the top, as the frozen record keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.protocols.base import ProtocolAdapter


def declared_tools(adapter: ProtocolAdapter, body: Any) -> tuple[Any, ...] | None:
    """The request's tool declarations as sent (function, custom and hosted tools alike);
    None when it declares none."""
    if not isinstance(body, dict):
        return None
    for name in adapter.tool_fields:
        tools = body.get(name)
        if isinstance(tools, list) and tools:
            return tuple(tools)
    return None


def request_params(adapter: ProtocolAdapter, body: Any) -> Mapping[str, Any] | None:
    """Every top-level field but the conversation and the tools (`adapter.not_params`);
    None for a body that is not an object."""
    if not isinstance(body, dict):
        return None
    skip = adapter.not_params
    return MappingProxyType({key: value for key, value in body.items() if key not in skip})
