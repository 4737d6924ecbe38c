"""OpenAI Responses items of tools the provider defines, typed the same in a response and in
its echo (a client that keeps no state sends the whole output back).

Web and file search, the code interpreter, image generation, the MCP tool's calls and tool
lists hold a call the provider ran and its outcome in one item: a `tool_call` with
`executed_by: provider` and a `tool_result` with the same call id (the item's id). A
`program` and its `program_output`, a hosted `shell_call` (run in a container) and its
`shell_call_output`, and a `tool_search_call` and `tool_search_output` the server executed
are two items sharing a `call_id`. An `mcp_approval_request` is a call the client answers
with an `mcp_approval_response`. Results are a short account (queries and source URLs,
logs, the MCP tool's output, an error), never image data or encrypted content.

A `compaction` item (history the provider compacted, encrypted) is marked the same in both
too, so the request carrying it back continues the step that made it.
"""

from __future__ import annotations

from typing import Any

from gateway.items import EXECUTED_BY, HELD_STATE, PROVIDER, TOOL_TYPE, Item, ItemKind
from gateway.opaque import Digests
from gateway.protocols.json_values import as_dict, as_list, as_str, compact
from gateway.protocols.openai_responses_outcomes import Outcome, outcome_of, search_query

ROLE = "assistant"
APPROVAL_REQUEST = "mcp_approval_request"
_APPROVAL = "mcp_approval"  # the tool type of an approval request and of its answer

# Items holding a call the provider ran and its outcome: the tool type each records.
_WHOLE = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
    "mcp_call": "mcp",
    "mcp_list_tools": "mcp_list_tools",
}
# Calls and results that are items of their own, paired by `call_id`.
_CALLS = {"program": "program", "shell_call": "shell", "tool_search_call": "tool_search"}
_RESULTS = {
    "program_output": "program",
    "shell_call_output": "shell",
    "tool_search_output": "tool_search",
}
TYPED = frozenset({*_WHOLE, *_CALLS, *_RESULTS, APPROVAL_REQUEST, "mcp_approval_response"})
# Every `tool_type` a provider-run item is given here: the label values metrics may use.
TOOL_TYPES = frozenset({*_WHOLE.values(), *_CALLS.values()})
# Tools that run at either end: which one is known from the item itself.
EITHER_END = frozenset({"shell_call", "tool_search_call", "tool_search_output"})


def runs_at_provider(item: dict[str, Any]) -> bool:
    """A shell call in a container the provider holds, or a tool search its server ran; a
    `local` shell and a tool search without `execution: server` are the client's."""
    kind = item.get("type")
    if kind == "shell_call":
        environment = as_str(as_dict(item.get("environment")).get("type"))
        return environment is not None and environment != "local"
    return item.get("execution") == "server"


def typed_items(item: dict[str, Any], attrs: dict[str, Any], shells: set[str]) -> list[Item] | None:
    """The items of `item`, or None when it is not one this module types (the client's shell
    call or tool search, a message, an unknown type). `shells` holds the call ids of hosted
    shell calls seen so far, so their outputs are known as the provider's."""
    kind = as_str(item.get("type")) or ""
    tool_type = _WHOLE.get(kind)
    if tool_type is not None:
        return _whole(kind, tool_type, item, attrs)
    if kind == APPROVAL_REQUEST:
        return [_approval_request(item, attrs)]
    if kind == "mcp_approval_response":
        return [_approval_response(item, attrs)]
    call_id = as_str(item.get("call_id"))
    if kind == "shell_call_output":
        hosted = call_id is not None and call_id in shells
        return [_result(kind, item, call_id, attrs)] if hosted else None
    if kind in EITHER_END and not runs_at_provider(item):
        return None
    if kind in _CALLS:
        if kind == "shell_call" and call_id is not None:
            shells.add(call_id)
        return [_call(kind, item, call_id or as_str(item.get("id")), attrs)]
    return [_result(kind, item, call_id, attrs)]


def _provider(tool_type: str, attrs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    facts = {k: v for k, v in extra.items() if v is not None}
    return {**attrs, EXECUTED_BY: PROVIDER, TOOL_TYPE: tool_type, **facts}


def _whole(kind: str, tool_type: str, item: dict[str, Any], attrs: dict[str, Any]) -> list[Item]:
    call_id = as_str(item.get("id"))
    server = as_str(item.get("server_label"))
    name = as_str(item.get("name")) if kind == "mcp_call" else tool_type
    extra = {"server": server, "container": as_str(item.get("container_id"))}
    call = Item(
        ItemKind.TOOL_CALL,
        role=ROLE,
        call_id=call_id,
        tool_name=name,
        arguments=_arguments(kind, item),
        attrs=_provider(tool_type, attrs, **extra),
    )
    return [call, _outcome_item(tool_type, call_id, outcome_of(kind, item), attrs)]


def _arguments(kind: str, item: dict[str, Any]) -> str:
    """What a whole item asked for, as JSON text: the part of it that is not its outcome."""
    if kind == "mcp_call":
        arguments = item.get("arguments")
        return arguments if isinstance(arguments, str) else compact(as_dict(arguments))
    if kind == "web_search_call":
        return compact(search_query(as_dict(item.get("action"))))
    if kind == "file_search_call":
        return compact({"queries": as_list(item.get("queries"))})
    if kind == "code_interpreter_call":
        code = as_str(item.get("code"))
        return compact({"code": code} if code is not None else {})
    if kind == "image_generation_call":
        asked = ("action", "revised_prompt", "size", "quality", "background", "output_format")
        return compact({key: item[key] for key in asked if item.get(key) is not None})
    return "{}"  # a tool list asks nothing


def _outcome_item(
    tool_type: str, call_id: str | None, outcome: Outcome, attrs: dict[str, Any]
) -> Item:
    return Item(
        ItemKind.TOOL_RESULT,
        role=ROLE,
        text=outcome.text,
        call_id=call_id,
        is_error=outcome.failed,
        attrs=_provider(tool_type, attrs, **outcome.facts),
    )


def _call(kind: str, item: dict[str, Any], call_id: str | None, attrs: dict[str, Any]) -> Item:
    tool_type = _CALLS[kind]
    if kind == "program":
        code = as_str(item.get("code"))  # its replay `fingerprint` is opaque: never kept
        arguments = compact({"code": code} if code is not None else {})
    else:
        arguments = compact(item.get("action" if kind == "shell_call" else "arguments"))
    environment = as_dict(item.get("environment"))
    return Item(
        ItemKind.TOOL_CALL,
        role=ROLE,
        call_id=call_id,
        tool_name=tool_type,
        arguments=arguments,
        attrs=_provider(tool_type, attrs, container=as_str(environment.get("container_id"))),
    )


def _result(kind: str, item: dict[str, Any], call_id: str | None, attrs: dict[str, Any]) -> Item:
    return _outcome_item(_RESULTS[kind], call_id, outcome_of(kind, item), attrs)


def _approval_request(item: dict[str, Any], attrs: dict[str, Any]) -> Item:
    """The provider asks the client whether to run an MCP tool: the client owes the answer."""
    arguments = item.get("arguments")
    server = as_str(item.get("server_label"))
    extra = {TOOL_TYPE: _APPROVAL, **({"server": server} if server else {})}
    return Item(
        ItemKind.TOOL_CALL,
        role=ROLE,
        call_id=as_str(item.get("id")),
        tool_name=as_str(item.get("name")),
        arguments=arguments if isinstance(arguments, str) else compact(as_dict(arguments)),
        attrs={**attrs, **extra},
    )


def _approval_response(item: dict[str, Any], attrs: dict[str, Any]) -> Item:
    """The client's answer to an approval request, paired with it by the request's id."""
    verdict = "approved" if item.get("approve") is True else "denied"
    reason = as_str(item.get("reason"))
    return Item(
        ItemKind.TOOL_RESULT,
        role="tool",
        text=f"{verdict}: {reason}" if reason else verdict,
        call_id=as_str(item.get("approval_request_id")),
        attrs={**attrs, TOOL_TYPE: _APPROVAL, "type": "mcp_approval_response"},
    )


COMPACTION = "compaction"
# One key everywhere: the mark of a compaction must be the same whichever gateway, process
# or transport recorded it and parses its echo. It hashes the provider's ciphertext, so it
# tells a reader of the store nothing a keyed one would hide.
_HELD = Digests(b"loopwatch responses compaction")


def held_state(item: dict[str, Any]) -> dict[str, Any]:
    """A compaction item's mark (`items.HELD_STATE`): a digest of its `encrypted_content`,
    which its echo always carries (clients such as Codex send back no id); the content
    itself is never kept."""
    content = item.get("encrypted_content") if item.get("type") == COMPACTION else None
    return {HELD_STATE: _HELD.of(content)} if isinstance(content, str) and content else {}
