"""What a request declared and asked for beside its conversation: the tools as it sent them
and its parameters (every other top-level field: model, temperature, max tokens, tool
choice, reasoning effort, …), for the step's record. Cheap: no deep copy, no
serialization; both read-only at the top, as the frozen record keeps them. And a recorded
request made into a fork's: model and parameters changed, asked for one answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.protocols.base import ProtocolAdapter


def declared_tools(adapter: ProtocolAdapter, body: Any) -> tuple[Any, ...] | None:
    """The request's tool declarations as sent (function, custom and hosted tools alike),
    from its top-level field or else from the one history element declaring them (a shape
    then refers to them: `wire_shapes.keys.REF`); None when it declares none."""
    if not isinstance(body, dict):
        return None
    for name in adapter.tool_fields:
        tools = body.get(name)
        if isinstance(tools, list) and tools:
            return tuple(tools)
    contained = adapter.contained_tools(body)
    return tuple(contained) if contained else None


def request_params(adapter: ProtocolAdapter, body: Any) -> Mapping[str, Any] | None:
    """Every top-level field but the conversation and the tools (`adapter.not_params`);
    None for a body that is not an object."""
    if not isinstance(body, dict):
        return None
    skip = adapter.not_params
    return MappingProxyType({key: value for key, value in body.items() if key not in skip})


# The body fields that switch a model's reasoning on (Anthropic `thinking`, OpenAI
# `reasoning` and Chat's `reasoning_effort`).
_REASONING = ("thinking", "reasoning", "reasoning_effort")
_OFF = ("disabled", "none")
# Fields that only make sense for a streamed answer.
_STREAM_ONLY = ("stream_options",)
# The headers a fork's caller may give the provider's key in: never `Authorization`, which
# carries the gateway's admin token on its API.
KEY_HEADERS = ("X-Loopwatch-Provider-Authorization", "x-api-key")


def fork_body(
    body: Mapping[str, Any], model: str | None, params: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`body` with `params` merged over its top-level fields (a null removes one), `model`
    set when given, and asked for one JSON answer."""
    merged = {**body, **(params or {})}
    if model is not None:
        merged["model"] = model
    merged = {name: value for name, value in merged.items() if value is not None}
    merged["stream"] = False
    for name in _STREAM_ONLY:
        merged.pop(name, None)
    return merged


def reasoning_off(body: Mapping[str, Any]) -> bool:
    """True when the body asks for no reasoning: none of its switches set, or set off."""
    return all(_off(body.get(name)) for name in _REASONING)


def _off(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return value in _OFF
    if isinstance(value, Mapping):
        return value.get("type") in _OFF or value.get("effort") in _OFF
    return False


def provider_key(headers: Mapping[str, str]) -> str | None:
    """The provider key a caller gave, bare (no `Bearer `): the fork's own header first."""
    for name in KEY_HEADERS:
        value = headers.get(name)
        if value:
            return value[7:] if value.startswith("Bearer ") else value
    return None
