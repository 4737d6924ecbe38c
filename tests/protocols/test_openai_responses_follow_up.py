"""Which requests are about an earlier Responses response and may carry its end."""

from __future__ import annotations

import pytest

from gateway.protocols.openai_responses_follow_up import response_id


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/v1/responses/resp_1", "resp_1"),  # a poll, or a resumed stream (query apart)
        ("POST", "/v1/responses/resp_1/cancel", "resp_1"),
        ("GET", "/v1/responses/resp_1/input_items", None),  # says nothing of the end
        ("DELETE", "/v1/responses/resp_1", None),
        ("POST", "/v1/responses/resp_1", None),
        ("GET", "/v1/responses/resp_1/cancel", None),
        ("POST", "/v1/responses/compact", None),
        ("GET", "/v1/responses/", None),
        ("POST", "/v1/responses//cancel", None),
        ("GET", "/v1/chat/completions/chatcmpl_1", None),
    ],
)
def test_follow_up_requests(method: str, path: str, expected: str | None) -> None:
    assert response_id(method, path) == expected
