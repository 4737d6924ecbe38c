"""A trace as a cassette: JSON Lines, a header then one line a step with the request the
provider received and its answer, rebuilt from the store by each protocol's encoder."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from gateway.items import Item, ItemKind
from gateway.protocols.base import Recorded
from gateway.protocols.registry import ENCODERS
from gateway.protocols.wire_shapes import spell
from gateway.step import PROTOCOL_HEADERS
from gateway.store.read import queries

FORMAT = "loopwatch-cassette/1"


def cassette_lines(engine: Engine, trace_id: str, version: str) -> list[str] | None:
    """The cassette of a stored trace, a line each (no newline); None: no such trace."""
    trace = queries.get_trace(engine, trace_id, opaque=True)  # payloads kept go back
    if trace is None:
        return None
    header = {
        "format": FORMAT,
        "trace_id": trace["id"],
        "created_at": trace["started_at"],
        "loopwatch_version": version,
    }
    lines = [json.dumps(header)]
    lines += [json.dumps(step_line(step, items, output)) for step, items, output in _walk(trace)]
    return lines


def step_to_fork(
    trace: Mapping[str, Any], seq: int, *, without_reasoning: bool = False
) -> tuple[dict[str, Any], tuple[Item, ...]]:
    """Step `seq`'s cassette line and the whole history its request carried;
    `without_reasoning`: the history's reasoning items left out (a fork that turns it off)."""
    for step, items, output in _walk(trace):
        if step["seq"] == seq:
            history = items[0]
            if without_reasoning:
                history = tuple(i for i in history if i.kind is not ItemKind.REASONING)
                items = (history, tuple(i for i in items[1] if i.kind is not ItemKind.REASONING))
            return step_line(step, items, output), history
    raise KeyError(seq)


Inputs = tuple[tuple[Item, ...], tuple[Item, ...]]  # a step's whole input, and its new part


def _walk(trace: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], Inputs, tuple[Item, ...]]]:
    """Each step, its whole input and the part new in it, and its output."""
    history: list[Item] = []
    answered = 0  # the previous step's output items: the end of `history`
    # Each step's history before its new items, and the `answered` it began with: a retry
    # goes on from where its failed attempt began, without that attempt's answer.
    began: dict[str, tuple[list[Item], int]] = {}
    for step in trace["steps"]:
        if step.get("retry_of") in began:
            history, answered = began[step["retry_of"]]
        began[step["id"]] = (list(history), answered)
        new = tuple(_item(i) for i in step["input_items"])
        spell.respelt(history, new, answered)
        history = history + list(new)
        output = tuple(_item(i) for i in step["output_items"])
        yield step, (tuple(history), new), output
        history += output
        answered = len(output)


def step_line(
    step: Mapping[str, Any],
    items: tuple[tuple[Item, ...], tuple[Item, ...]],
    output: tuple[Item, ...],
) -> dict[str, Any]:
    """A step's line; `items`: its whole input and the part of it new in this step."""
    line = {name: step[name] for name in ("seq", "protocol", "method", "path")}
    encoder = ENCODERS.get(step["protocol"])
    if encoder is None:  # a passthrough call: no body is recorded
        return {**line, "request": None, "response": None}
    recorded = _recorded(step, items, output)
    status = step["http_status"]
    response: dict[str, Any] = {"status": status}
    if step["error"] is not None or (status is not None and status >= 400):
        response |= {"headers": _JSON, "body": {"error": step["error"]}}
    elif step["stream"]:
        response |= {"headers": _SSE, "events": encoder.response_events(recorded)}
    else:
        response |= {"headers": _JSON, "body": encoder.response_body(recorded)}
    request = {"headers": dict(step["attrs"].get(PROTOCOL_HEADERS) or {})}
    request["body"] = encoder.request_body(recorded)
    return {**line, "request": request, "response": response}


_JSON = {"content-type": "application/json"}
_SSE = {"content-type": "text/event-stream"}


def _recorded(
    step: Mapping[str, Any],
    items: tuple[tuple[Item, ...], tuple[Item, ...]],
    output: tuple[Item, ...],
) -> Recorded:
    started = datetime.fromisoformat(step["started_at"])
    return Recorded(
        params=step["params"] or {},
        tools=tuple(step["tools"]) if step["tools"] else None,
        items=items[0],
        new_items=items[1],
        output=output,
        model=step["model"],
        stream=bool(step["stream"]),
        response_id=step["response_id"],
        raw_stop_reason=step["raw_stop_reason"],
        usage=step["usage"],
        created=int(started.timestamp()),
    )


def _item(row: Mapping[str, Any]) -> Item:
    kind = ItemKind(row["kind"])
    # Readable reasoning is never exported: a summary stands for it at most.
    text = None if kind is ItemKind.REASONING else row["text"]
    return Item(
        kind,
        row["role"],
        text,
        row["call_id"],
        row["tool_name"],
        row["arguments"],
        row["is_error"],
        dict(row["attrs"] or {}),
    )
