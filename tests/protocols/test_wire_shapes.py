"""Wire shapes: the elements a step brought, recorded with its items, spelled back from what
the store keeps (redacted texts, no readable reasoning, opaque payloads only when kept)."""

from __future__ import annotations

from typing import Any

from gateway.config import RedactionSettings
from gateway.items import Item, ItemKind
from gateway.protocols import request_facts
from gateway.protocols.anthropic import encode as anthropic_encode
from gateway.protocols.base import Recorded
from gateway.protocols.openai_chat import encode as chat_encode
from gateway.protocols.openai_responses_encode import ResponsesEncoder
from gateway.protocols.registry import ADAPTERS
from gateway.protocols.wire_shapes import spell
from gateway.protocols.wire_shapes.keys import OPAQUE, REASONING_PLACEHOLDER, WIRE
from gateway.protocols.wire_shapes.record import shaped
from gateway.redaction.redactor import Redactor

MESSAGES = ADAPTERS["messages"]
CHAT = ADAPTERS["chat"]
REDACTOR = Redactor(RedactionSettings())


def _anthropic_body() -> dict[str, Any]:
    return {
        "model": "claude",
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "mail me at a@b.example"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "secret plan", "signature": "sig-1"},
                    {"type": "text", "text": "On it."},
                    {"type": "tool_use", "id": "t1", "name": "sh", "input": {"cmd": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "a\nb"}],
                        "is_error": False,
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
                "x_unknown": 1,
            },
        ],
    }


def _stored(body: dict[str, Any]) -> list[Item]:
    items = MESSAGES.parse_request(body).items
    return [REDACTOR.redact_item(i) for i in shaped(MESSAGES, body, items)]


def test_every_element_comes_back_as_sent_up_to_redaction() -> None:
    body = _anthropic_body()
    stored = _stored(body)
    system = [i for i in stored if "message_index" not in i.attrs]
    turns = [i for i in stored if "message_index" in i.attrs]
    assert spell.fill(spell.covered(system[0])[1][0], system) == body["system"]  # type: ignore[index]
    rebuilt = spell.history(turns, anthropic_encode.messages)
    assert rebuilt[0]["content"][0]["text"] == "mail me at [REDACTED:email]"
    assert rebuilt[1]["content"][0] == {"type": "thinking", "thinking": REASONING_PLACEHOLDER}
    assert rebuilt[1:] == [
        {
            **body["messages"][1],
            "content": [rebuilt[1]["content"][0], *body["messages"][1]["content"][1:]],
        },
        body["messages"][2],
    ]


def test_kept_opaque_payloads_go_back_where_they_were() -> None:
    stored = _stored(_anthropic_body())
    turns = [i for i in stored if "message_index" in i.attrs]
    thinking = next(n for n, i in enumerate(turns) if i.kind is ItemKind.REASONING)
    turns[thinking] = turns[thinking].with_changes(
        attrs={**turns[thinking].attrs, OPAQUE: {"signature": "sig-1"}}
    )
    rebuilt = spell.history(turns, anthropic_encode.messages)
    assert rebuilt[1]["content"][0]["signature"] == "sig-1"


def test_items_without_a_shape_are_spelled_canonically() -> None:
    """Records from before shapes, or a shape that does not parse, fall back."""
    items = [
        Item(ItemKind.USER, role="user", text="hi", attrs={"message_index": 0}),
        Item(ItemKind.USER, role="user", text="yo", attrs={"message_index": 1, WIRE: "junk"}),
    ]
    assert spell.history(items, anthropic_encode.messages) == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "yo"},
    ]


def test_chat_parts_joined_into_one_item_come_back_as_parts() -> None:
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a\nb"}, {"type": "text", "text": "c"}],
            },
            {"role": "assistant", "content": "", "reasoning_content": "hidden"},
        ],
    }
    stored = shaped(CHAT, body, CHAT.parse_request(body).items)
    rebuilt = spell.history(list(stored), chat_encode.messages)
    assert rebuilt[0] == body["messages"][0]
    assert rebuilt[1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": REASONING_PLACEHOLDER,
    }


def _part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def test_a_shape_is_not_laid_over_items_of_other_kinds() -> None:
    """The echo of an answer typed otherwise than its stored items is not used."""
    history = [Item(ItemKind.USER, role="user", text="q"), Item(ItemKind.ASSISTANT_TEXT, text="a")]
    echo = [{"n": 1, "k": "c", "els": [{"role": "assistant", "content": "x"}]}]
    new = (Item(ItemKind.USER, role="user", text="next", attrs={"wire_echo": echo}),)
    spell.respelt(history, new, 1)
    assert WIRE not in history[1].attrs


def test_odd_elements_are_shaped_or_left_unshaped_never_refused() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [
            7,
            "text",
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{"}}]},
            {"role": "user", "content": [None, {"type": "text", "text": None}]},
        ],
    }
    items = CHAT.parse_request(body).items
    stored = shaped(CHAT, body, items)
    assert [i.kind for i in stored] == [i.kind for i in items]
    assert len(spell.history(list(stored), chat_encode.messages)) == len(body["messages"])


def test_inline_media_is_never_stored_in_a_shape() -> None:
    image = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 50}
    body = {
        "model": "claude",
        "messages": [
            {"role": "user", "content": [{"type": "image", "source": image}, _part("what?")]}
        ],
    }
    stored = shaped(MESSAGES, body, MESSAGES.parse_request(body).items)
    assert "iVBORw0KGgo" not in repr([dict(i.attrs) for i in stored])
    rebuilt = spell.history(list(stored), anthropic_encode.messages)
    assert rebuilt[0]["content"][0]["source"] == {"type": "base64", "media_type": "image/png"}


RESPONSES = ADAPTERS["responses"]
_SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
_PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "text"}}


def _codex_body(*containers: list[Any], tools: list[Any] | None = None) -> dict[str, Any]:
    """Tools declared in `additional_tools` input items, as Codex sends them."""
    declaring = [{"type": "additional_tools", "role": "developer", "tools": t} for t in containers]
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    body: dict[str, Any] = {"model": "gpt", "input": [*declaring, user], "store": False}
    return {**body, "tools": tools} if tools is not None else body


def _rebuilt(body: dict[str, Any]) -> tuple[dict[str, Any], list[Item]]:
    """The request a cassette spells from what the step stores."""
    stored = [REDACTOR.redact_item(i) for i in shaped(RESPONSES, body, _parse(body))]
    tools = request_facts.declared_tools(RESPONSES, body)
    params = request_facts.request_params(RESPONSES, body) or {}
    step = Recorded(
        params=params,
        tools=tools,
        items=tuple(stored),
        new_items=tuple(stored),
        output=(),
        model="gpt",
        stream=False,
        response_id=None,
        raw_stop_reason=None,
        usage={},
        created=0,
    )
    return ResponsesEncoder().request_body(step), stored


def _parse(body: dict[str, Any]) -> list[Item]:
    return RESPONSES.parse_request(body).items


def test_tools_declared_in_the_history_are_the_steps_tool_set_and_referred_to() -> None:
    body = _codex_body([_SHELL, _PATCH])
    assert request_facts.declared_tools(RESPONSES, body) == (_SHELL, _PATCH)
    rebuilt, stored = _rebuilt(body)
    assert "apply_patch" not in repr([dict(i.attrs) for i in stored])  # stored once, apart
    assert rebuilt == body  # and no top-level `tools` that was never sent
    # What the checks judge calls by is unchanged.
    assert RESPONSES.parse_request(body).tools == {"shell": {"type": "object"}, "apply_patch": None}


def test_tools_declared_elsewhere_too_stay_inline_in_the_element() -> None:
    top_level = _codex_body([_PATCH], tools=[_SHELL])
    assert request_facts.declared_tools(RESPONSES, top_level) == (_SHELL,)
    twice = _codex_body([_SHELL], [_PATCH])
    assert request_facts.declared_tools(RESPONSES, twice) is None
    for body in (top_level, twice):
        rebuilt, stored = _rebuilt(body)
        assert "apply_patch" in repr([dict(i.attrs) for i in stored])
        assert rebuilt == body


def _chat_loop(echo_fields: dict[str, Any]) -> dict[str, Any]:
    """A Chat request going on from a tool call: the answer echoed with `echo_fields`."""
    call = {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": '{"a": 1}'}}
    echoed = {"role": "assistant", "content": None, "tool_calls": [call], **echo_fields}
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Run it."},
            echoed,
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ],
    }


def test_elements_spelled_the_usual_way_store_no_shape_and_extra_fields_alone() -> None:
    usual = chat_encode.ChatEncoder().canonical
    for fields in ({}, {"refusal": None, "annotations": []}):
        body = _chat_loop(fields)
        items = CHAT.parse_request(body).items
        new = shaped(CHAT, body, items[-1:], usual, items)  # the tool result is the new item
        attrs = new[0].attrs
        assert WIRE not in attrs
        if not fields:
            assert "wire_echo" not in attrs  # the echo was spelled the usual way too
            continue
        (cover,) = attrs["wire_echo"]
        assert cover == {"n": 1, "k": "c", "x": fields}  # the extra fields alone
        # Spelled back: the echoed answer (stored as the earlier step's output) with them.
        history = list(items[:-1])
        spell.respelt(history, new, 1)
        assert spell.history([*history, *new], usual) == body["messages"]
        # The whole look, without the request's items, decides the same.
        assert shaped(CHAT, body, items[-1:], usual)[0].attrs == attrs
