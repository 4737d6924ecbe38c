"""A scripted model behind the fake provider: answers every protocol from the request alone.

Set it as `FakeProvider.responder`. It reads the whole conversation a request stands for
(including server-held state: stored responses, item references, message threads), refuses
what the real APIs refuse, and answers with the script's next move in the request's protocol,
streamed or not. It also lists models, as frameworks may ask for them.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes import scripted_anthropic, scripted_chat, scripted_responses
from tests.fakes.provider import Received, Reply
from tests.fakes.script import BadRequest, Ids, Planner, check_pairing

CREATED = 1767225600


class ScriptedModel:
    def __init__(self, script: Planner) -> None:
        self.script = script
        self.ids = Ids()
        self.store = scripted_responses.Store()
        self.threads = scripted_anthropic.Threads()

    def __call__(self, received: Received) -> Reply:
        anthropic = "anthropic-version" in {h.lower() for h in received.headers}
        error = scripted_anthropic.error if anthropic else scripted_chat.error
        try:
            return self._answer(received, anthropic)
        except BadRequest as exc:
            return error(exc.status, str(exc), exc.code)

    def _answer(self, received: Received, anthropic: bool) -> Reply:
        route = (received.method, received.path.removesuffix("/"))
        if route[0] == "GET" and route[1].startswith("/v1/models"):
            return models_reply(route[1], anthropic)
        if route == ("POST", "/v1/chat/completions"):
            return self._chat(received.json())
        if route == ("POST", "/v1/responses"):
            return self._responses(received.json())
        if route == ("POST", "/v1/messages"):
            return self._messages(received, received.json())
        raise BadRequest(f"no route {route[0]} {route[1]}", status=404)

    def _chat(self, body: dict[str, Any]) -> Reply:
        said = scripted_chat.history(body)
        check_pairing(said)
        move = self.script.next_move(said, scripted_chat.declared(body))
        return scripted_chat.answer(body, move, self.ids)

    def _responses(self, body: dict[str, Any]) -> Reply:
        items = scripted_responses.resolve(body, self.store)
        said = scripted_responses.history(items)
        check_pairing(said)
        move = self.script.next_move(said, scripted_responses.declared(body))
        return scripted_responses.answer(body, move, self.ids, self.store, items)

    def _messages(self, received: Received, body: dict[str, Any]) -> Reply:
        conversation = scripted_anthropic.resolve(received, body, self.threads)
        said = scripted_anthropic.history(conversation.messages)
        check_pairing(said)
        move = self.script.next_move(said, scripted_anthropic.declared(conversation.fields))
        return scripted_anthropic.answer(body, move, self.ids, self.threads, conversation)


MODELS = ["gpt-5", "gpt-4.1", "gpt-4o", "claude-sonnet-4-6"]


def models_reply(path: str, anthropic: bool, names: list[str] = MODELS) -> Reply:
    """The model list (or one model), as each provider shapes it."""

    def entry(name: str) -> dict[str, Any]:
        if anthropic:
            return {"type": "model", "id": name, "display_name": name, "created_at": CREATED}
        return {"id": name, "object": "model", "created": CREATED, "owned_by": "system"}

    name = path.removeprefix("/v1/models").strip("/")
    if name:
        return Reply(body=entry(name))
    data = [entry(n) for n in names]
    if anthropic:
        return Reply(body={"data": data, "has_more": False, "first_id": names[0], "last_id": None})
    return Reply(body={"object": "list", "data": data})


def bodies(received: list[Received], path: str) -> list[dict[str, Any]]:
    """The JSON bodies of the requests that reached `path`, in order."""
    return [json.loads(r.body) for r in received if r.path == path and r.method == "POST"]
