"""Mutated real requests of every adapter, as bytes, through everything the handler runs
before it forwards: refused (the gateway's BadRequest) exactly when no strict JSON reader
reads them, and otherwise typed, placed, checked and rewritten without an error, into items
a record can hold."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings

from gateway import jsoncodec
from gateway.checks.pairing import check_request
from gateway.config import Settings
from gateway.continuation.keys import ContinuationKeys
from gateway.continuation.sessions import session_id
from gateway.errors import BadRequest
from gateway.protocols import request_body, request_facts
from gateway.protocols.anthropic.messages import AnthropicMessagesAdapter
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.openai_chat.completions import OpenAIChatAdapter
from gateway.protocols.openai_responses import OpenAIResponsesAdapter
from gateway.recording import codec
from gateway.routing import resolve
from gateway.step import RefusalRecord
from tests.factories import T0
from tests.factories.mutations import PATHS, mutated_requests, readable, seed_requests

# Fresh adapters: what one remembers of a history element is what this test checks too.
ADAPTERS: dict[str, ProtocolAdapter] = {
    "chat": OpenAIChatAdapter(),
    "responses": OpenAIResponsesAdapter(),
    "messages": AnthropicMessagesAdapter(),
}
SEEDS = seed_requests()
SETTINGS = Settings()
KEYS = ContinuationKeys(b"fuzz-secret")
# A fixed number of examples from a fixed seed: the same inputs on every run.
FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _before_forwarding(protocol: str, raw: bytes) -> None:
    """The handler's steps before the provider, in its order, on what it decoded."""
    adapter = ADAPTERS[protocol]
    body = request_body.decode(raw, adapter.history_field)
    parsed = adapter.parse_request(body)
    resolve(SETTINGS, adapter.wire, parsed.model, PATHS[protocol], "")
    KEYS.scan(parsed.items).attempt_key(parsed.model, parsed.stream)
    session_id({}, body, adapter.session_fields)
    check_request(
        parsed.items,
        history=adapter.history,
        new_items=parsed.items,
        previous_output=None,
        continues_response=parsed.previous_response_id is not None,
    )
    for clamp in (None, 1):
        prepared = adapter.prepare_body(body, parsed, max_tokens=clamp)
        jsoncodec.dumps(prepared.body)
    request_facts.declared_tools(adapter, body)
    params = request_facts.request_params(adapter, body)
    # What the step's record will hold: spooled and read back whole.
    record = RefusalRecord("tr-fuzz", T0, (), kind="request", items=tuple(parsed.items))
    assert codec.decode(codec.encode(record)) == record
    jsoncodec.dumps(dict(params or {}))


@FUZZ
@given(case=mutated_requests(SEEDS))
def test_mutated_requests_are_refused_only_when_unreadable(case: tuple[str, bytes]) -> None:
    protocol, raw = case
    try:
        _before_forwarding(protocol, raw)
    except BadRequest as exc:
        event("refused")
        assert not readable(raw), f"refused a readable body: {exc.message}"
        return
    event("read")
    assert readable(raw), "a body no strict reader reads went on"


def test_every_protocol_has_seeds() -> None:
    assert {protocol for protocol, _ in SEEDS} == set(ADAPTERS)
    assert len(SEEDS) >= 15
