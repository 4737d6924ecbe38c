"""Responses answers with items of tools the provider defines (or of types not known here):
decoded from a body and from a stream to the same items, in the same order, as the echo of
that answer is typed; the client owes results only for its own calls and approvals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.checks.pairing import check_history
from gateway.checks.tools import ToolChecker
from gateway.continuation.keys import ContinuationKeys
from gateway.items import Item, ItemKind, StopReason, ViolationKind
from gateway.protocols.openai_responses import ADAPTER
from gateway.stream.assembler import Assembler
from gateway.stream.sse import SSEDecoder
from tests.factories import load_fixture, output_of
from tests.fakes.responses import function_call, message, reasoning, response, stream_events
from tests.fakes.responses_hosted import (
    PNG_BASE64,
    code_interpreter_call,
    file_search_call,
    image_generation_call,
    mcp_approval_request,
    mcp_approval_response,
    mcp_call,
    mcp_list_tools,
    program,
    program_output,
    shell_call,
    shell_call_output,
    tool_search_call,
    tool_search_output,
    web_search_call,
)

SEARCH = "ws_68c42d26866c819da8d5f5a0e6"
HOLOGRAM = {"id": "hg_1", "type": "hologram", "frames": 3}  # a type no SDK knows yet
BY_PROGRAM = {"type": "program", "caller_id": "call_prg1"}
ANSWERS: dict[str, list[dict[str, Any]]] = {
    "web search": [
        reasoning(["Look it up."]),
        web_search_call(SEARCH, "ESA news", "https://www.esa.int/probe"),
        message("The ESA launched a probe."),
    ],
    "file search": [
        file_search_call("fs_1", ["refund policy"], "policy.pdf", "faq.md"),
        message("Refunds take 14 days."),
    ],
    "code interpreter": [
        code_interpreter_call("ci_1", "print(6 * 7)", "42\n"),
        message("It is 42."),
    ],
    "image generation": [image_generation_call("ig_1", "A red fox"), message("Here it is.")],
    "mcp": [
        mcp_list_tools("mcpl_1", "tracker", "list_tickets", "close_ticket"),
        mcp_call("mcp_1", "list_tickets", "tracker", {"state": "open"}, output="3 open"),
        message("There are 3 open tickets."),
    ],
    "mcp failed": [
        mcp_call("mcp_2", "list_tickets", "tracker", {}, error="Error: no such table"),
        message("The tracker failed."),
    ],
    "mcp approval": [
        mcp_list_tools("mcpl_1", "tracker", "close_ticket"),
        mcp_approval_request("mcpr_1", "close_ticket", "tracker", {"id": 12}),
    ],
    "program": [
        program("call_prg1", "const t = await tools.get_expenses({team: 'ml'});"),
        {**function_call("call_f1", "get_expenses", {"team": "ml"}), "caller": BY_PROGRAM},
    ],
    "program output": [program_output("call_prg1", "1234"), message("$1234.")],
    "hosted shell": [
        shell_call("call_sh1", "ls /mnt/data", container="cntr_1"),
        shell_call_output("call_sh1", "report.csv\n"),
        message("One file."),
    ],
    "client shell": [message("Listing."), shell_call("call_sh2", "ls")],
    "server tool search": [
        tool_search_call("call_ts1", "crm"),
        tool_search_output("call_ts1", "crm", "find_contact"),
        {**function_call("call_f2", "find_contact", {"name": "Ann"}), "namespace": "crm"},
    ],
    "client tool search": [tool_search_call("call_ts2", "crm", execution="client")],
    "unknown item": [message("Before."), HOLOGRAM, message("After.")],
    "unknown last": [message("Here."), HOLOGRAM],
}
# Wire items that are a call and its outcome in one.
WHOLE = {
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
}


def assembled(deltas: list[Any]) -> Any:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler)


def from_body(output: list[dict[str, Any]]) -> Any:
    return assembled(ADAPTER.decode_body(response(output)))


def from_stream(output: list[dict[str, Any]]) -> Any:
    decoder, events = ADAPTER.new_event_decoder(), SSEDecoder()
    deltas = [
        delta
        for chunk in stream_events(response(output))
        for event in events.decode(chunk)
        for delta in decoder.decode(event)
    ]
    return assembled(deltas)


QUESTION = {"role": "user", "content": "go"}


def echoed(output: list[dict[str, Any]]) -> list[Item]:
    return ADAPTER.parse_request({"input": [QUESTION, *output]}).items[1:]


def same(items: list[Item]) -> list[tuple[Any, ...]]:
    """What an echo must keep: the fields the continuation chain hashes, reasoning aside."""
    return [
        (
            i.kind,
            i.text or "",
            i.call_id,
            i.tool_name,
            json.loads(i.arguments or "null") if i.arguments and i.arguments[0] in "{[" else None,
            bool(i.is_error),
            i.attrs.get("executed_by"),
        )
        for i in items
        if i.kind is not ItemKind.REASONING
    ]


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_an_answer_decodes_the_same_from_a_body_a_stream_and_its_echo(name: str) -> None:
    output = ANSWERS[name]
    whole, streamed = from_body(output), from_stream(output)
    assert same(whole.output_items) == same(streamed.output_items)
    assert same(whole.output_items) == same(echoed(output))
    # No item dropped: every wire item is an item (a call and its outcome, two), reasoning
    # aside.
    expected = sum(2 if i["type"] in WHOLE else 1 for i in output if i["type"] != "reasoning")
    assert len(same(whole.output_items)) == expected
    assert whole.violations == streamed.violations == []


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_chain_of_an_answer_is_the_chain_of_its_echo(name: str) -> None:
    keys = ContinuationKeys(b"k" * 32)
    output = ANSWERS[name]
    question = ADAPTER.parse_request({"input": [QUESTION]}).items
    recorded = keys.step_key(keys.chain(question), from_stream(output).output_items)
    history = ADAPTER.parse_request(
        {"input": [QUESTION, *output, {"role": "user", "content": "ok"}]}
    )
    assert recorded is not None
    assert recorded in [b.key for b in keys.scan(history.items).boundaries]


@pytest.mark.parametrize(
    ("name", "stop"),
    [
        ("web search", StopReason.COMPLETED),
        ("mcp", StopReason.COMPLETED),
        ("hosted shell", StopReason.COMPLETED),
        ("server tool search", StopReason.TOOL_CALLS),  # for the function call after it
        ("program", StopReason.TOOL_CALLS),
        ("mcp approval", StopReason.TOOL_CALLS),  # the client owes its answer
        ("client shell", StopReason.TOOL_CALLS),
        ("client tool search", StopReason.TOOL_CALLS),
    ],
)
def test_only_what_the_client_answers_makes_a_tool_call_stop(name: str, stop: StopReason) -> None:
    for result in (from_body(ANSWERS[name]), from_stream(ANSWERS[name])):
        assert result.stop_reason is stop
        assert result.violations == []


def test_the_searches_results_are_a_short_account() -> None:
    call, result, text = from_stream(ANSWERS["web search"]).output_items[1:]
    assert (call.call_id, call.tool_name, call.attrs["tool_type"]) == (
        SEARCH,
        "web_search",
        "web_search",
    )
    assert json.loads(call.arguments or "") == {
        "type": "search",
        "query": "ESA news",
        "queries": ["ESA news"],
    }
    assert (result.call_id, result.text, result.is_error) == (
        SEARCH,
        "ESA news\nhttps://www.esa.int/probe",
        False,
    )
    assert text.text == "The ESA launched a probe."
    files = from_body(ANSWERS["file search"]).output_items[1]
    assert (files.text, files.attrs["results"]) == ("policy.pdf\nfaq.md", 2)
    assert "excerpt" not in (files.text or "")


def test_what_ran_and_what_failed_is_told() -> None:
    ran = from_stream(ANSWERS["code interpreter"]).output_items[:2]
    assert [(i.kind, i.arguments, i.text) for i in ran] == [
        (ItemKind.TOOL_CALL, '{"code":"print(6 * 7)"}', None),
        (ItemKind.TOOL_RESULT, None, "42\n"),
    ]
    assert ran[0].attrs["container"] == "cntr_68c42d1d0878819d"
    failed = from_stream(ANSWERS["mcp failed"]).output_items[1]
    assert (failed.is_error, failed.text, failed.attrs["status"]) == (
        True,
        "Error: no such table",
        "failed",
    )
    listed, _, called, answered = from_body(ANSWERS["mcp"]).output_items[:4]
    assert (listed.attrs["server"], called.tool_name, called.attrs["server"]) == (
        "tracker",
        "list_tickets",
        "tracker",
    )
    assert answered.text == "3 open"
    shell = from_stream(ANSWERS["hosted shell"]).output_items[1]
    assert (shell.call_id, shell.text, shell.attrs["exit_code"]) == ("call_sh1", "report.csv\n", 0)


def test_image_data_and_opaque_fingerprints_are_never_kept() -> None:
    for name in ("image generation", "program"):
        for items in (from_body(ANSWERS[name]).output_items, echoed(ANSWERS[name])):
            stored = json.dumps([item.to_json() for item in items])
            assert PNG_BASE64[:40] not in stored and "fp_opaque" not in stored
    image = from_stream(ANSWERS["image generation"]).output_items[1]
    assert image.text == "png 1024x1024 high"


def test_a_call_made_by_a_program_names_it() -> None:
    ran, call = from_stream(ANSWERS["program"]).output_items
    assert (ran.call_id, ran.attrs["executed_by"], ran.attrs["tool_type"]) == (
        "call_prg1",
        "provider",
        "program",
    )
    assert (call.call_id, call.attrs["caller"], call.attrs["caller_type"]) == (
        "call_f1",
        "call_prg1",
        "program",
    )
    assert "executed_by" not in call.attrs  # the client runs it
    assert echoed(ANSWERS["program"])[1].attrs["caller"] == "call_prg1"


def test_a_client_shell_call_and_tool_search_owe_their_outputs() -> None:
    shell = from_stream(ANSWERS["client shell"]).output_items[-1]
    assert (shell.kind, shell.call_id, shell.tool_name) == (ItemKind.TOOL_CALL, "call_sh2", "shell")
    assert "executed_by" not in shell.attrs
    search = from_body(ANSWERS["client tool search"]).output_items[0]
    assert (search.call_id, search.tool_name) == ("call_ts2", "tool_search")
    answered = ADAPTER.parse_request(
        {
            "tools": [{"type": "tool_search", "execution": "client"}],
            "input": [
                QUESTION,
                *ANSWERS["client tool search"],
                tool_search_output("call_ts2", "crm", "find_contact", execution="client"),
            ],
        }
    )
    result = answered.items[-1]
    assert (result.kind, result.call_id, result.text) == (
        ItemKind.TOOL_RESULT,
        "call_ts2",
        "crm.find_contact",
    )
    assert answered.tools is not None and "tool_search" in answered.tools
    assert check_history(answered.items, history=ADAPTER.history) == []
    unanswered = ADAPTER.parse_request({"input": [QUESTION, *ANSWERS["client shell"]]})
    (missing,) = check_history(unanswered.items, history=ADAPTER.history)
    assert (missing.kind, missing.call_id) == (ViolationKind.MISSING_TOOL_RESULT, "call_sh2")


def test_an_approval_request_is_answered_by_its_approval_response() -> None:
    asked = [QUESTION, *ANSWERS["mcp approval"]]
    for approve, text in ((True, "approved"), (False, "denied")):
        items = ADAPTER.parse_request(
            {"input": [*asked, mcp_approval_response("mcpr_1", approve)]}
        ).items
        request, response_ = items[-2:]
        assert (request.kind, request.call_id, request.tool_name) == (
            ItemKind.TOOL_CALL,
            "mcpr_1",
            "close_ticket",
        )
        assert request.attrs["tool_type"] == "mcp_approval" and "executed_by" not in request.attrs
        assert (response_.kind, response_.call_id, response_.text) == (
            ItemKind.TOOL_RESULT,
            "mcpr_1",
            text,
        )
        assert check_history(items, history=ADAPTER.history) == []
    unanswered = ADAPTER.parse_request({"input": [*asked, {"role": "user", "content": "?"}]})
    (missing,) = check_history(unanswered.items, history=ADAPTER.history)
    assert (missing.kind, missing.call_id) == (ViolationKind.MISSING_TOOL_RESULT, "mcpr_1")
    stray = ADAPTER.parse_request({"input": [QUESTION, mcp_approval_response("mcpr_9", True)]})
    (orphan,) = check_history(stray.items, history=ADAPTER.history)
    assert (orphan.kind, orphan.call_id) == (ViolationKind.ORPHAN_TOOL_RESULT, "mcpr_9")


def test_provider_calls_need_no_declaration() -> None:
    """Hosted tools and MCP servers are declared by type: their calls are never undeclared."""
    declared = ADAPTER.parse_request({"tools": [{"type": "mcp", "server_label": "tracker"}]}).tools
    calls = [
        *from_body(ANSWERS["mcp"]).output_items,
        *from_body(ANSWERS["mcp approval"]).output_items,
    ]
    assert declared == {} and ToolChecker().check(declared, calls) == []


def test_an_unknown_item_keeps_its_place_and_id() -> None:
    items = from_stream(ANSWERS["unknown item"]).output_items
    assert [(i.kind, i.text, i.attrs.get("type")) for i in items] == [
        (ItemKind.ASSISTANT_TEXT, "Before.", None),
        (ItemKind.OTHER, None, "hologram"),
        (ItemKind.ASSISTANT_TEXT, "After.", None),
    ]
    assert items[1].attrs["item_ids"] == ["hg_1"]
    assert echoed(ANSWERS["unknown item"])[1].attrs["type"] == "hologram"


def test_a_recorded_mix_of_every_hosted_tool_decodes_threads_and_pairs() -> None:
    fixture = load_fixture("responses", "nonstream_hosted_tools_echo.json")
    whole = assembled(ADAPTER.decode_body(fixture["response"]))
    decoder, events = ADAPTER.new_event_decoder(), SSEDecoder()
    raw = load_fixture("responses", "stream_hosted_tools.sse")
    streamed = assembled([d for e in events.decode(raw) for d in decoder.decode(e)])
    assert same(whole.output_items) == same(streamed.output_items)
    parsed = ADAPTER.parse_request(fixture["request"])
    _, *echo, approval = parsed.items
    assert same(echo) == same(whole.output_items)
    assert (approval.kind, approval.call_id, approval.text) == (
        ItemKind.TOOL_RESULT,
        "mcpr_68f1a2b3c4d5e6f7",
        "approved",
    )
    assert check_history(parsed.items, history=ADAPTER.history) == []
    assert whole.stop_reason is streamed.stop_reason is StopReason.TOOL_CALLS
    assert whole.violations == streamed.violations == []
