"""The Playbook of the exchange: scripted events in, the commands it returns asserted.

Each scenario is a small table, one row per event: what happens, then what the exchange must
answer. `finished(...)` matches a Finished command by the outcome fields it names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.exchange.machine import Command, Exchange, Finished, Forward, Settle

SSE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def chunk(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


TEXT = chunk({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "yo"}}]})
STOP = chunk({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})


@dataclass(frozen=True)
class finished:  # reads as a command in the tables
    """Matches Finished whose outcome has these field values."""

    fields: dict[str, Any]

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "fields", fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Finished):
            return False
        return all(getattr(other.outcome, k) == v for k, v in self.fields.items())


def settled(total: int | None) -> Callable[[Command], bool]:
    return lambda c: isinstance(c, Settle) and c.usage.total_tokens == total


def head(status: int = 200, content_type: str | None = SSE, **kw: Any) -> Callable[[Exchange], Any]:
    return lambda x: x.head(
        status,
        content_type=content_type,
        content_encoding=kw.get("encoding"),
        content_length=kw.get("length"),
    )


def receive(data: bytes) -> Callable[[Exchange], Any]:
    return lambda x: x.receive(data)


def end(x: Exchange) -> Any:
    return x.body_ended()


def gone(x: Exchange) -> Any:
    return x.client_gone()


def broke(x: Exchange) -> Any:
    return x.provider_broke()


def timeout(x: Exchange) -> Any:
    return x.timed_out()


Row = tuple[Callable[[Exchange], list[Command]], list[Any]]


def observed(data: bytes) -> Forward:
    """Forwarded first, then fed back to the exchange to observe."""
    return Forward(data, observe=True)


def relayed(exchange: Exchange, commands: list[Command]) -> list[Command]:
    """What the relay does: bytes forwarded with `observe` are fed back at once."""
    out: list[Command] = []
    for command in commands:
        out.append(command)
        if isinstance(command, Forward) and command.observe:
            out.extend(relayed(exchange, exchange.forwarded(command.data)))
    return out


def play(exchange: Exchange, rows: list[Row]) -> list[Command]:
    """Run the table; return every command, in order, for further checks."""
    everything: list[Command] = []
    for number, (event, expected) in enumerate(rows):
        commands = relayed(exchange, event(exchange))
        assert len(commands) == len(expected), f"row {number}: {commands}"
        for command, want in zip(commands, expected, strict=True):
            ok = want(command) if callable(want) else want == command
            assert ok, f"row {number}: {command} is not {want}"
        everything.extend(commands)
    return everything


def outcome_of(commands: list[Command]) -> Any:
    (done,) = [c for c in commands if isinstance(c, Finished)]
    return done.outcome
