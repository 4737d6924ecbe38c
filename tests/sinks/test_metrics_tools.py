"""The labels of `loopwatch_tool_calls_total`: who ran a call, and its type from a bounded set."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.protocols.registry import ADAPTERS
from gateway.sinks.instruments import PROVIDER_TOOL_TYPES
from gateway.sinks.metrics import tool_call_labels
from tests.factories import tool_call


def test_the_bounded_types_are_the_adapters() -> None:
    declared = {t for adapter in ADAPTERS.values() for t in adapter.provider_tool_types}
    assert declared == PROVIDER_TOOL_TYPES and {"web_search", "mcp"} <= declared
    # Both providers' hosted tools are named, not folded to `other`.
    assert {"code_interpreter", "file_search", "image_generation", "shell"} <= declared


@pytest.mark.parametrize(
    ("attrs", "labels"),
    [
        ({}, ("client", "function")),
        ({"caller": "srvtoolu_1"}, ("client", "function")),  # run by the agent all the same
        ({"executed_by": "provider", "tool_type": "web_search"}, ("provider", "web_search")),
        ({"executed_by": "provider", "tool_type": "hologram"}, ("provider", "other")),
        ({"executed_by": "provider", "tool_type": {"odd": 1}}, ("provider", "other")),
        ({"executed_by": "provider"}, ("provider", "other")),
    ],
)
def test_labels_of_a_call(attrs: dict[str, Any], labels: tuple[str, str]) -> None:
    assert tool_call_labels(tool_call(**attrs)) == labels
