"""Each protocol's declared tools and parameters: every top-level field but the conversation
and the tools, whatever the field (unknown ones too)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.protocols.registry import ADAPTERS
from gateway.protocols.request_facts import declared_tools, request_params

CHAT = ADAPTERS["chat"]

CHAT_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
RESPONSES_TOOLS = [{"type": "function", "name": "f"}, {"type": "web_search"}]
ANTHROPIC_TOOL = {"name": "f", "description": "d", "input_schema": {"type": "object"}}


@pytest.mark.parametrize(
    ("protocol", "body", "tools", "params"),
    [
        (
            "chat",
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [CHAT_TOOL],
                "temperature": 0.2,
                "max_completion_tokens": 9,
                "reasoning_effort": "low",
                "stop": ["END"],
                "some_new_field": {"x": 1},
            },
            [CHAT_TOOL],
            {
                "model": "m",
                "temperature": 0.2,
                "max_completion_tokens": 9,
                "reasoning_effort": "low",
                "stop": ["END"],
                "some_new_field": {"x": 1},
            },
        ),
        (
            "chat",
            {"model": "m", "messages": [], "functions": [{"name": "legacy"}], "top_p": 1},
            [{"name": "legacy"}],
            {"model": "m", "top_p": 1},
        ),
        (
            "responses",
            {
                "model": "m",
                "input": "hi",
                "instructions": "be brief",
                "tools": RESPONSES_TOOLS,
                "reasoning": {"effort": "high"},
                "max_output_tokens": 50,
                "parallel_tool_calls": False,
            },
            RESPONSES_TOOLS,
            {
                "model": "m",
                "reasoning": {"effort": "high"},
                "max_output_tokens": 50,
                "parallel_tool_calls": False,
            },
        ),
        (
            "messages",
            {
                "model": "m",
                "system": "s",
                "messages": [],
                "tools": [ANTHROPIC_TOOL],
                "tool_choice": {"type": "auto"},
                "max_tokens": 64,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
            },
            [ANTHROPIC_TOOL],
            {
                "model": "m",
                "tool_choice": {"type": "auto"},
                "max_tokens": 64,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
            },
        ),
        ("chat", {"model": "m", "messages": [], "tools": []}, None, {"model": "m"}),
        ("chat", ["not", "an", "object"], None, None),
    ],
)
def test_tools_and_parameters_of_each_protocol(
    protocol: str, body: Any, tools: list[Any] | None, params: dict[str, Any] | None
) -> None:
    declared = declared_tools(ADAPTERS[protocol], body)
    assert (None if declared is None else list(declared)) == tools
    assert request_params(ADAPTERS[protocol], body) == params


def test_tools_and_parameters_are_read_only_and_leave_the_body_alone() -> None:
    body = {"model": "m", "messages": [], "tools": [CHAT_TOOL], "temperature": 0}
    tools, params = declared_tools(CHAT, body), request_params(CHAT, body)
    assert isinstance(tools, tuple)
    assert params is not None
    with pytest.raises(TypeError):
        params["temperature"] = 1  # type: ignore[index]
    assert body == {"model": "m", "messages": [], "tools": [CHAT_TOOL], "temperature": 0}
