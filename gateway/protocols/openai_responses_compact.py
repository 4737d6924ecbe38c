"""`POST /v1/responses/compact` (openai `responses.compact`): a Responses step that compacts
its history. Parsed and threaded as a Responses request, never streamed, no parameter added;
its answer (openai `CompactedResponse`) is the compacted history: the user messages kept,
then one `compaction` item holding the rest, encrypted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.items import Item, StopReason
from gateway.protocols.base import ParsedRequest, PreparedBody, ProtocolAdapter
from gateway.protocols.json_values import as_dict, as_list, as_str
from gateway.protocols.openai_responses import OpenAIResponsesAdapter, message_items
from gateway.protocols.openai_responses_events import (
    ResponsesEventDecoder,
    meta_of,
    usage_of,
)
from gateway.stream.deltas import Delta, EndDelta, FinishDelta, ItemsDelta, UsageDelta

# The step's `attrs.operation`: what the request asked of the provider beside an answer.
OPERATION = {"operation": "compact"}


def decode_compacted(body: Any) -> list[Delta]:
    """A compacted response: its kept messages typed as in a history, any other item as a
    response's output item (the `compaction` one as `other`, with its type, id and mark);
    it has no status: an answer is a completed one."""
    if not isinstance(body, dict):
        return []
    decoder = ResponsesEventDecoder()
    deltas: list[Delta] = [meta_of(body)]
    for index, entry in enumerate(map(as_dict, as_list(body.get("output")))):
        if as_str(entry.get("type")) == "message":
            items = (_output(item) for item in message_items(entry, index))
            deltas.append(ItemsDelta(tuple(items)))
        else:
            deltas += decoder.item_done(index, entry)
    usage = usage_of(body.get("usage"))
    if usage is not None:
        deltas.append(UsageDelta(usage))
    return [*deltas, FinishDelta(StopReason.COMPLETED, "completed"), EndDelta()]


def _output(item: Item) -> Item:
    """A kept message as an output item: its place is the output's, not a history's."""
    attrs = {k: v for k, v in item.attrs.items() if k != "message_index"}
    return item.with_changes(attrs=attrs)


class OpenAIResponsesCompactAdapter(OpenAIResponsesAdapter):
    """The Responses adapter on the compact endpoint: its steps are `responses` steps."""

    path: str = "/v1/responses/compact"

    def parse_request(self, body: Any) -> ParsedRequest:
        parsed = super().parse_request(body)
        parsed.stream = False  # the endpoint answers with one JSON object
        parsed.compaction = True
        parsed.attrs.update(OPERATION)
        return parsed

    def prepare_body(
        self, body: dict[str, Any], parsed: ParsedRequest, *, max_tokens: int | None
    ) -> PreparedBody:
        # The endpoint takes no `max_output_tokens`: a token budget is held, never clamped.
        return PreparedBody(body=body)

    def decode_body(self, body: Any) -> list[Delta]:
        return decode_compacted(body)


# Typed here: compiling the package with mypyc needs it before registry.py infers it.
ADAPTER: OpenAIResponsesCompactAdapter = OpenAIResponsesCompactAdapter()

if TYPE_CHECKING:
    _conforms: ProtocolAdapter = ADAPTER
