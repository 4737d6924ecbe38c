"""The scripted model on the Responses API, with the server-side state the real API keeps.

A stored response (`store` is true unless the request says false) keeps its input and output,
so a later request can name it by `previous_response_id` or its items by `item_reference`.
Reasoning models (any but gpt-4* and gpt-3*) answer with a reasoning item first: its summary
when the request asks for one, its encrypted content when `include` asks for it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import responses
from tests.fakes.provider import Reply
from tests.fakes.script import BadRequest, Ids, Move, Said, estimate_tokens
from tests.fakes.scripted_chat import text_of


@dataclass
class Store:
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # output item id → item
    conversations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by response


def resolve(body: dict[str, Any], store: Store) -> list[dict[str, Any]]:
    """The whole conversation the request stands for: the previous response's, then its input
    with every item reference replaced by the stored item."""
    items: list[dict[str, Any]] = []
    previous = body.get("previous_response_id")
    if previous is not None:
        if previous not in store.conversations:
            raise BadRequest(
                f"Previous response with id '{previous}' not found.",
                code="previous_response_not_found",
            )
        items += store.conversations[previous]
    given = body.get("input")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    for item in given or []:
        if item.get("type") == "item_reference":
            if item["id"] not in store.items:
                raise BadRequest(f"Item with id '{item['id']}' not found.", status=404)
            item = store.items[item["id"]]
        items.append(item)
    return items


def history(items: list[dict[str, Any]]) -> list[Said]:
    """Consecutive assistant items (reasoning, text, function calls) make one assistant turn."""
    said: list[Said] = []
    for item in items:
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in ("reasoning", "function_call") or (kind == "message" and role == "assistant"):
            text = text_of(item.get("content")) if kind == "message" else ""
            calls = (item["call_id"],) if kind == "function_call" else ()
            if said and said[-1].role == "assistant":
                last = said.pop()
                text, calls = last.text + text, last.calls + calls
            said.append(Said("assistant", text, calls))
        elif kind == "function_call_output":
            said.append(Said("tool", text_of(item.get("output")), call_id=item["call_id"]))
        elif kind == "message" and role == "user":
            said.append(Said("user", text_of(item.get("content"))))
    return said


def declared(body: dict[str, Any]) -> set[str]:
    return {t["name"] for t in body.get("tools") or [] if t.get("type") == "function"}


def _reasons(model: str) -> bool:
    return not model.startswith(("gpt-4", "gpt-3"))


def _reasoning_item(body: dict[str, Any], move: Move, ids: Ids) -> dict[str, Any]:
    summary = [move.thought] if (body.get("reasoning") or {}).get("summary") else []
    encrypted = None
    if "reasoning.encrypted_content" in (body.get("include") or []):
        encrypted = "gAAAAB" + base64.b64encode(ids.signature().encode()).decode()
    return responses.reasoning(summary, encrypted=encrypted, item_id=ids.item("rs"))


def output_items(body: dict[str, Any], move: Move, ids: Ids) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if _reasons(str(body.get("model", ""))):
        output.append(_reasoning_item(body, move, ids))
    for call in move.calls:
        output.append(responses.function_call(ids.openai_call(), call.name, call.arguments))
    if move.text:
        output.append(responses.message(move.text, item_id=ids.item("msg")))
    return output


def answer(
    body: dict[str, Any], move: Move, ids: Ids, store: Store, items: list[dict[str, Any]]
) -> Reply:
    output = output_items(body, move, ids)
    thinking = sum(estimate_tokens(i) for i in output if i["type"] == "reasoning")
    use = responses.usage(
        estimate_tokens(items), estimate_tokens(output) + thinking, reasoning=thinking
    )
    result = responses.response(
        output,
        response_id=ids.response(),
        use=use,
        previous_response_id=body.get("previous_response_id"),
    )
    result["store"] = body.get("store", True) is not False
    result["model"] = str(body.get("model", responses.MODEL))
    result["instructions"] = body.get("instructions")
    result["tools"] = body.get("tools") or []
    if result["store"]:
        store.items.update((i["id"], i) for i in output)
        store.conversations[result["id"]] = [*items, *output]
    return responses.streamed(result) if body.get("stream") else responses.reply(result)
