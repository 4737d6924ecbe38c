"""Anthropic answers with blocks the provider ran (or did not know): decoded from a body and
from a stream to the same items, in the same order, as the echo of that answer is typed."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from gateway.continuation.keys import ContinuationKeys
from gateway.items import ItemKind
from gateway.protocols.anthropic.messages import ADAPTER
from gateway.stream.assembler import Assembler
from gateway.stream.sse import SSEDecoder
from tests.factories import output_of
from tests.fakes.anthropic import (
    called_by,
    code_execution_result,
    mcp_tool_result,
    mcp_tool_use,
    message,
    server_tool_use,
    stream_events,
    text,
    thinking,
    tool_use,
    web_search_result,
)

SEARCH = "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"
ANSWERS: dict[str, list[dict[str, Any]]] = {
    "web search": [
        text("Let me look. "),
        server_tool_use(SEARCH, "web_search", {"query": "ESA news"}),
        web_search_result(SEARCH, ("ESA launches probe", "https://www.esa.int/probe")),
        text("The ESA "),
        text("launched a probe."),
    ],
    "mcp connector": [
        mcp_tool_use("mcptoolu_01", "list_tickets", "tracker", {"state": "open"}),
        mcp_tool_result("mcptoolu_01", "no such table", is_error=True),
        text("The tracker failed."),
    ],
    "programmatic call": [
        thinking("plan"),
        server_tool_use("srvtoolu_02", "code_execution", {"code": "print(f())"}),
        called_by(tool_use("toolu_03", "f", {}), "srvtoolu_02"),
    ],
    "code ran": [code_execution_result("srvtoolu_02", "42\n"), text("It is 42.")],
    "unknown block": [text("a"), {"type": "hologram", "frames": 3}, text("b")],
    "search error": [
        server_tool_use(SEARCH, "web_search", {"query": "x"}),
        {
            "type": "web_search_tool_result",
            "tool_use_id": SEARCH,
            "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
        },
    ],
}


def from_body(body: dict[str, Any]) -> list[Any]:
    assembler = Assembler()
    for delta in ADAPTER.decode_body(body):
        assembler.feed(delta)
    return list(output_of(assembler).output_items)


def from_stream(body: dict[str, Any]) -> list[Any]:
    decoder, events, assembler = ADAPTER.new_event_decoder(), SSEDecoder(), Assembler()
    for chunk in stream_events(body):
        for event in events.decode(chunk):
            for delta in decoder.decode(event):
                assembler.feed(delta)
    return list(output_of(assembler).output_items)


def echoed(content: list[dict[str, Any]]) -> list[Any]:
    request = {
        "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": content}]
    }
    return ADAPTER.parse_request(request).items[1:]


def same(items: list[Any]) -> list[tuple[Any, ...]]:
    """What an echo must keep: the fields the continuation chain hashes (arguments as the JSON
    they are), reasoning aside."""
    return [
        (
            i.kind,
            i.text or "",
            i.call_id,
            i.tool_name,
            json.loads(i.arguments or "null"),
            bool(i.is_error),
        )
        for i in items
        if i.kind is not ItemKind.REASONING
    ]


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_an_answer_decodes_the_same_from_a_body_a_stream_and_its_echo(name: str) -> None:
    body = message(ANSWERS[name])
    whole, streamed = from_body(body), from_stream(body)
    assert same(whole) == same(streamed) == same(echoed(body["content"]))
    # No block dropped: every block but thinking and joined text is an item of its own.
    blocks = [b for b in body["content"] if b["type"] != "thinking"]
    texts = sum(1 for a, b in itertools.pairwise(blocks) if a["type"] == b["type"] == "text")
    assert len(same(whole)) == len(blocks) - texts


def test_the_chain_of_an_answer_is_the_chain_of_its_echo() -> None:
    keys = ContinuationKeys(b"k" * 32)
    body = message(ANSWERS["web search"])
    request = {"messages": [{"role": "user", "content": "go"}]}
    question = ADAPTER.parse_request(request).items
    recorded = keys.step_key(keys.chain(question), from_stream(body))
    history = ADAPTER.parse_request(
        {"messages": [*request["messages"], {"role": "assistant", "content": body["content"]}]}
    ).items
    assert recorded is not None and recorded in [b.key for b in keys.scan(history).boundaries]


def test_provider_results_tell_failures_and_what_ran() -> None:
    search_failed = from_body(message(ANSWERS["search error"]))[1]
    assert (search_failed.kind, search_failed.is_error, search_failed.text) == (
        ItemKind.TOOL_RESULT,
        True,
        "max_uses_exceeded",
    )
    mcp_failed = from_stream(message(ANSWERS["mcp connector"]))[1]
    assert (mcp_failed.is_error, mcp_failed.text) == (True, "no such table")
    call = from_stream(message(ANSWERS["programmatic call"]))[-1]
    assert (call.attrs["caller"], call.attrs["caller_type"]) == (
        "srvtoolu_02",
        "code_execution_20250825",
    )
    assert "executed_by" not in call.attrs  # the client runs it


def test_a_call_and_its_result_share_a_tool_type_the_adapter_declares() -> None:
    """Tool search is named by its variant (`tool_search_tool_regex`, `..._bm25`) and its
    result by the family (`tool_search_tool_result`): both are `tool_search`. Shapes:
    anthropic.types.ToolSearchToolResultBlock, ToolSearchToolSearchResultBlock."""
    references = {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
    }
    for variant in ("tool_search_tool_regex", "tool_search_tool_bm25"):
        body = message(
            [
                server_tool_use("srvtoolu_04", variant, {"query": "weather"}),
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_04",
                    "content": references,
                },
            ]
        )
        for items in (from_body(body), from_stream(body), echoed(body["content"])):
            call, result = items
            assert call.tool_name == variant and result.text == "get_weather"
            assert call.attrs["tool_type"] == result.attrs["tool_type"] == "tool_search"
    kinds = [
        i.attrs["tool_type"]
        for name in ANSWERS
        for i in from_body(message(ANSWERS[name]))
        if i.attrs.get("executed_by")
    ]
    assert kinds and set(kinds) <= ADAPTER.provider_tool_types
