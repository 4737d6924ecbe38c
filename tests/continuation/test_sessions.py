"""Session ids: header first, then each protocol's body fields, bounded and raw."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from gateway.continuation.sessions import MAX_SESSION_CHARS, SESSION_HEADER, session_id
from gateway.protocols.registry import ADAPTERS

# Each protocol's session fields, as its adapter declares them; passthrough reads none.
FIELDS = {name: adapter.session_fields for name, adapter in ADAPTERS.items()} | {"passthrough": ()}

CHAT_BODY: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [],
    "user": "user-42",
    "safety_identifier": "sid-7",
    "metadata": {"session_id": "sess-1"},
}


def test_the_header_wins_over_the_body() -> None:
    assert session_id({SESSION_HEADER: "hdr"}, CHAT_BODY, FIELDS["chat"]) == "hdr"
    # aiohttp hands headers over case-insensitively.
    headers = CIMultiDict({"x-loopwatch-session-id": "lower"})
    assert session_id(headers, CHAT_BODY, FIELDS["responses"]) == "lower"


@pytest.mark.parametrize("protocol", ["chat", "responses"])
def test_openai_fields_most_specific_first(protocol: str) -> None:
    body = dict(CHAT_BODY)
    assert session_id({}, body, FIELDS[protocol]) == "sess-1"
    body["metadata"] = {"other": "x"}
    assert session_id({}, body, FIELDS[protocol]) == "sid-7"
    del body["safety_identifier"]
    assert session_id({}, body, FIELDS[protocol]) == "user-42"
    del body["user"]
    assert session_id({}, body, FIELDS[protocol]) is None


def test_anthropic_metadata_user_id() -> None:
    claude_code = "user_abc_account_123_session_9f8e"
    body = {"model": "claude", "metadata": {"user_id": claude_code}, "user": "ignored"}
    assert session_id({}, body, FIELDS["messages"]) == claude_code
    assert session_id({}, {"metadata": {}}, FIELDS["messages"]) is None
    # The OpenAI fields mean nothing to Anthropic, and the reverse.
    assert session_id({}, {"user": "u"}, FIELDS["messages"]) is None
    assert session_id({}, {"metadata": {"user_id": "u"}}, FIELDS["chat"]) is None


def test_passthrough_uses_the_header_alone() -> None:
    assert session_id({}, CHAT_BODY, FIELDS["passthrough"]) is None
    assert session_id({SESSION_HEADER: "h"}, None, FIELDS["passthrough"]) == "h"


@pytest.mark.parametrize(
    "body",
    [
        None,
        "a string",
        [1, 2],
        {"user": 42},
        {"user": ""},
        {"user": "   "},
        {"metadata": "session_id"},
        {"metadata": {"session_id": ["x"]}},
        {"metadata": None, "user": None},
    ],
)
def test_odd_bodies_give_no_session(body: Any) -> None:
    assert session_id({}, body, FIELDS["chat"]) is None


def test_blank_headers_fall_through_and_values_are_bounded() -> None:
    assert session_id({SESSION_HEADER: "  "}, {"user": "u"}, FIELDS["chat"]) == "u"
    long = "s" * 10_000
    assert session_id({SESSION_HEADER: long}, None, FIELDS["chat"]) == "s" * MAX_SESSION_CHARS
    assert session_id({}, {"user": f"  {long}"}, FIELDS["chat"]) == "s" * MAX_SESSION_CHARS
    # Returned raw: redaction happens with everything else before storage.
    assert session_id({}, {"user": "bob@example.com"}, FIELDS["chat"]) == "bob@example.com"
