"""Background responses as the Responses API answers them: the response at each status
(`ResponseStatus` in openai/types/responses/response_status.py: queued, in_progress, then
completed, failed, cancelled or incomplete) and the events a resumed stream replays after
`starting_after` (each event's `sequence_number`, openai/types/responses/*_event.py)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.provider import Reply
from tests.fakes.responses import response, stream_events


def at(body: dict[str, Any], status: str) -> dict[str, Any]:
    """The background response `body` as a poll sees it at `status`: no output or usage yet
    before its end (the API's `output: []`, `usage: null`)."""
    working = status in ("queued", "in_progress")
    return {
        **body,
        "background": True,
        "status": status,
        "output": [] if working else body["output"],
        "usage": None if working else body["usage"],
    }


def background(output: list[dict[str, Any]], response_id: str, **kwargs: Any) -> dict[str, Any]:
    return {**response(output, response_id=response_id, **kwargs), "background": True}


def events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A background response's event stream, as JSON events: created while queued, queued,
    in progress, its items, its terminal event."""
    sent = [json.loads(e.split(b"data: ", 1)[1]) for e in stream_events(body)]
    created, in_progress, *rest = sent
    created["response"]["status"] = "queued"
    queued = {"type": "response.queued", "response": {**created["response"]}}
    replayed = [created, queued, in_progress, *rest]
    for number, event in enumerate(replayed):
        event["sequence_number"] = number
    return replayed


def sse_reply(sent: list[dict[str, Any]]) -> Reply:
    framed = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in sent]
    return Reply(events=framed)
