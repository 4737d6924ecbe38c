"""A fork planned from a stored trace: step N's request rebuilt as for a cassette, the model
and parameters changed, or the reason it cannot be sent (a clear error naming the step)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import BadRequest, ForkImpossible
from gateway.items import RETURNS, SIGNED_TEXT, Item, ItemKind
from gateway.protocols.request_facts import fork_body, reasoning_off
from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.ui.cassette import step_to_fork


@dataclass(frozen=True, slots=True)
class ForkAsked:
    at_step: int
    model: str | None = None
    params: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Planned:
    """The request a fork sends: to the protocol's path, with its protocol headers."""

    protocol: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def fork_asked(body: Any) -> ForkAsked:
    """The fork API's body read, or BadRequest naming the field that is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object with at_step.")
    at_step, model, params = body.get("at_step"), body.get("model"), body.get("params")
    if type(at_step) is not int:
        raise BadRequest("at_step must be a step number.", param="at_step")
    if model is not None and (not isinstance(model, str) or not model):
        raise BadRequest("model must be a model name.", param="model")
    if params is not None and not isinstance(params, dict):
        raise BadRequest("params must be a JSON object of request fields.", param="params")
    if body.get("upstream") is not None:
        raise BadRequest(
            "upstream is not supported: a fork goes where the gateway routes its model.",
            param="upstream",
        )
    return ForkAsked(at_step, model, params)


def plan(trace: Mapping[str, Any], asked: ForkAsked) -> Planned:
    """Step `asked.at_step`'s request with the fork's changes."""
    seqs = [step["seq"] for step in trace["steps"]]
    seq = asked.at_step
    if seq not in seqs:
        shown = f"{min(seqs)} to {max(seqs)}" if seqs else "none: the trace has no steps"
        raise BadRequest(f"at_step {seq} is not a step of the trace (steps: {shown}).")
    line, history = _rebuilt(trace, seq, without_reasoning=False)
    body = fork_body(line["request"]["body"], asked.model, asked.params)
    if reasoning_off(body):  # the reasoning of the history is then left out
        line, history = _rebuilt(trace, seq, without_reasoning=True)
        body = fork_body(line["request"]["body"], asked.model, asked.params)
    else:
        _check_reasoning(seq, history)
    headers = dict(line["request"].get("headers") or {})
    return Planned(line["protocol"], line["path"], headers, body)


def _rebuilt(
    trace: Mapping[str, Any], seq: int, *, without_reasoning: bool
) -> tuple[dict[str, Any], tuple[Item, ...]]:
    try:
        line, history = step_to_fork(trace, seq, without_reasoning=without_reasoning)
    except (KeyError, TypeError, ValueError) as exc:
        raise ForkImpossible(f"step {seq}'s request cannot be rebuilt: {exc!r}") from exc
    if line.get("request") is None:
        raise ForkImpossible(
            f"step {seq} cannot be forked: it is a passthrough call, its body is not recorded."
        )
    return line, history


# `attrs["encrypted"]` of a reasoning item the provider sent an encrypted payload with (its
# adapter says so; the payload is stored only with `keep_opaque_reasoning`).
_ENCRYPTED = "encrypted"


def _check_reasoning(seq: int, history: tuple[Item, ...]) -> None:
    """The provider wants reasoning back that the fork cannot send as it came: refused. Its
    opaque payloads go back where they were kept (`keep_opaque_reasoning`), unless they
    sign readable text, which is never stored."""
    not_kept: set[str] = set()
    text_signed: set[str] = set()
    for item in history:
        wanted = _wanted(item)
        if wanted is None:
            continue
        if OPAQUE not in item.attrs:
            not_kept.add(wanted)
        elif item.attrs.get(SIGNED_TEXT):
            text_signed.add(wanted)
    reasons = []
    if not_kept:
        reasons.append(f"{', '.join(sorted(not_kept))}, whose payload was not kept")
    if text_signed:
        reasons.append(
            f"{', '.join(sorted(text_signed))}, whose text its signature checks and the "
            "gateway never stores"
        )
    if reasons:
        raise ForkImpossible(
            f"step {seq} cannot be forked with reasoning on: the provider needs back its "
            f"reasoning ({'; '.join(reasons)}). "
            "Turn reasoning off in params (set its field to null)."
        )


def _wanted(item: Item) -> str | None:
    """What of the provider's own `item` must go back to it, if anything."""
    if RETURNS in item.attrs:
        return str(item.attrs[RETURNS])
    if item.kind is ItemKind.REASONING and item.attrs.get(_ENCRYPTED):
        return "encrypted reasoning"
    return None
