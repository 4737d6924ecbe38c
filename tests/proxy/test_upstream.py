"""Header handling between client, gateway and provider."""

from __future__ import annotations

from multidict import CIMultiDict

from gateway.proxy.upstream import forward_headers, response_headers


def test_hop_by_hop_and_connection_named_headers_are_not_forwarded() -> None:
    incoming = CIMultiDict(
        {
            "Host": "gateway",
            "Connection": "keep-alive, X-Trace-Hop",
            "X-Trace-Hop": "1",
            "Transfer-Encoding": "chunked",
            "X-Loopwatch-Trace-Id": "run-1",
            "Authorization": "Bearer sk-client",
            "OpenAI-Beta": "assistants=v2",
        }
    )
    out = forward_headers(incoming, api_key=None, protocol="chat")
    assert out == {"Authorization": "Bearer sk-client", "OpenAI-Beta": "assistants=v2"}


def test_route_key_replaces_every_client_key() -> None:
    incoming = CIMultiDict({"x-api-key": "sk-ant-client", "authorization": "Bearer sk-client"})
    out = forward_headers(incoming, api_key="sk-ant-route", protocol="messages")
    assert out == {"x-api-key": "sk-ant-route"}


def test_content_length_kept_only_when_the_body_is_unchanged() -> None:
    incoming = CIMultiDict({"Content-Length": "12", "Connection": "close", "x-request-id": "r"})
    assert response_headers(incoming, body_rewritten=False) == [
        ("Content-Length", "12"),
        ("x-request-id", "r"),
    ]
    assert response_headers(incoming, body_rewritten=True) == [("x-request-id", "r")]
