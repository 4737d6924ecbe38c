"""The unhappy paths of proxying: slow, broken and failing providers, clients that leave."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import yarl
from multidict import CIMultiDict

from tests.factories import chat_request
from tests.fakes.chat import completion, stream_chunks, streamed, usage
from tests.fakes.provider import Reply
from tests.harness import (  # noqa: F401
    Gateway,
    GatewayFactory,
    gateway,
    make_gateway,
    provider,
)
from tests.wire_equal import unshaped

pytestmark = pytest.mark.sqlite

HELLO = chat_request("hi")


async def post(
    gw: Gateway, body: bytes | dict, **headers: str
) -> tuple[int, CIMultiDict[str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            gw.openai_base + "/chat/completions",
            # A file object, not bytes: aiohttp warns that a large bytes body blocks its loop.
            data=io.BytesIO(data),
            headers={"Content-Type": "application/json", **headers},
        ) as r,
    ):
        return r.status, CIMultiDict(r.headers), await r.read()


async def test_stream_reaches_client_before_provider_finishes(gateway: Gateway) -> None:
    gate = asyncio.Event()
    gateway.provider.queue(Reply(events=stream_chunks("Hello world, slowly."), gate=gate))
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            gateway.openai_base + "/chat/completions",
            json={**HELLO, "stream": True, "stream_options": {"include_usage": True}},
        ) as r,
    ):
        first = await asyncio.wait_for(r.content.readuntil(b"\n\n"), 5)
        assert b"chat.completion.chunk" in first
        assert not gateway.provider.sent_all.is_set()  # the provider still holds the rest
        gate.set()
        rest = await r.read()
    assert rest.endswith(b"data: [DONE]\n\n")


async def test_stream_bytes_are_forwarded_unchanged(gateway: Gateway) -> None:
    events = stream_chunks("Exact bytes, please.")
    gateway.provider.queue(Reply(events=events))
    body = {**HELLO, "stream": True, "stream_options": {"include_usage": True}}
    status, headers, raw = await post(gateway, body)
    assert status == 200
    assert raw == b"".join(events)
    assert headers["x-request-id"] == "req_fake_stream"
    assert headers["X-Loopwatch-Trace-Id"].startswith("tr-")
    assert headers["X-Loopwatch-Step-Id"].startswith("st-")


async def test_client_disconnect_cancels_upstream_and_records_what_arrived(
    gateway: Gateway,
) -> None:
    gate = asyncio.Event()
    gateway.provider.queue(Reply(events=stream_chunks("partial answer then more"), gate=gate))
    async with aiohttp.ClientSession() as s:
        r = await s.post(gateway.openai_base + "/chat/completions", json={**HELLO, "stream": True})
        await r.content.readuntil(b"\n\n")
        r.close()  # the client goes away mid-stream
    # The gateway drops the provider's connection at once, while the provider still holds.
    await asyncio.wait_for(gateway.provider.disconnected.wait(), 5)
    gate.set()
    for _ in range(50):
        traces = await gateway.traces()
        if traces:
            break
        await asyncio.sleep(0.05)
    step = (await gateway.trace(traces[0]["id"]))["steps"][0]
    assert step["stop_reason"] == "cancelled"
    assert not gateway.provider.sent_all.is_set()


async def test_provider_dying_mid_arguments_is_interrupted(gateway: Gateway) -> None:
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": "loop bugs"}'},
        }
    ]
    events = stream_chunks(tool_calls=calls)
    gateway.provider.queue(Reply(events=events, die_after=3))
    sdk = openai.AsyncOpenAI(base_url=gateway.openai_base, api_key="sk-x", max_retries=0)
    async with sdk:
        with pytest.raises(openai.APIError):
            tools: Any = [{"type": "function", "function": {"name": "search"}}]
            stream = await sdk.chat.completions.create(**HELLO, stream=True, tools=tools)
            async for _ in stream:
                pass
    trace = await gateway.trace((await gateway.traces())[0]["id"])
    step = trace["steps"][0]
    assert step["stop_reason"] == "interrupted"
    assert step["output_items"][0]["kind"] == "tool_call"
    assert step["output_items"][0]["attrs"].get("incomplete") is True
    assert [v["kind"] for v in trace["violations"]] == ["stream_interrupted"]


async def test_provider_error_reaches_client_as_sent(gateway: Gateway) -> None:
    error = {
        "error": {
            "message": "Rate limit reached for gpt-4o",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    gateway.provider.queue(Reply(status=429, body=error, headers={"retry-after": "7"}))
    status, headers, raw = await post(gateway, HELLO)
    assert status == 429 and json.loads(raw) == error
    assert headers["retry-after"] == "7"
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert step["stop_reason"] == "error" and step["http_status"] == 429
    assert step["error"]["code"] == "rate_limit_exceeded"


async def test_unreachable_provider_gives_openai_502(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw = await make_gateway(upstream_url="http://127.0.0.1:9/v1")
    status, _, raw = await post(gw, HELLO)
    assert status == 502
    error = json.loads(raw)["error"]
    assert error["code"] == "upstream_unreachable" and error["message"]
    step = (await gw.trace((await gw.traces())[0]["id"]))["steps"][0]
    assert step["stop_reason"] == "error"


async def refused_trace(gw: Gateway, headers: CIMultiDict[str]) -> dict[str, Any]:
    """The trace a refused request left: named in the answer, with its violation."""
    await gw.flush()
    return await gw.trace(headers["X-Loopwatch-Trace-Id"])


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b'"just a string"',
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser
        b'{"model": "gpt-4o", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
async def test_unreadable_bodies_are_refused_and_recorded(gateway: Gateway, body: bytes) -> None:
    got, headers, raw = await post(gateway, body)
    assert got == 400
    assert json.loads(raw)["error"]["code"] == "invalid_request"
    assert gateway.provider.received == []
    trace = await refused_trace(gateway, headers)
    assert trace["status"] == "refused" and trace["step_count"] == 0
    (violation,) = trace["violations"]
    assert (violation["kind"], violation["enforced"]) == ("invalid_request", True)
    assert "invalid_request" in violation["detail"]


@pytest.mark.parametrize(
    ("body", "shape"),
    [
        (json.dumps({"model": "gpt-4o"}).encode(), {"field": "messages", "shape": "null"}),
        (
            b'{"model": "gpt-4o", "messages": [[["deep"]]]}',
            {"message_index": 0, "shape": "array"},
        ),
        (
            b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}, 7]}',
            {"message_index": 1, "shape": "number"},
        ),
    ],
)
async def test_bodies_the_provider_may_judge_are_forwarded_unchanged(
    gateway: Gateway, body: bytes, shape: dict[str, Any]
) -> None:
    """Forward compatible: a shape the gateway cannot type is the provider's to answer."""
    refusal = {"error": {"message": "messages: bad", "type": "invalid_request_error"}}
    gateway.provider.queue(Reply(status=400, body=refusal))
    got, headers, raw = await post(gateway, body)
    assert (got, json.loads(raw)) == (400, refusal)  # the provider's own answer
    assert gateway.provider.received[0].body == body
    await gateway.flush()
    step = (await gateway.trace(headers["X-Loopwatch-Trace-Id"]))["steps"][0]
    assert step["http_status"] == 400
    others = [unshaped(item["attrs"]) for item in step["input_items"] if item["kind"] == "other"]
    assert others == [shape]


async def test_huge_body_is_refused(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw = await make_gateway(max_body_bytes=2048)
    status, headers, raw = await post(gw, chat_request("x" * 5000))
    assert status == 413
    assert json.loads(raw)["error"]["code"] == "request_too_large"
    assert gw.provider.received == []
    trace = await refused_trace(gw, headers)
    assert [v["kind"] for v in trace["violations"]] == ["invalid_request"]
    assert "request_too_large" in trace["violations"][0]["detail"]


async def test_passthrough_is_forwarded_and_recorded(gateway: Gateway) -> None:
    models = {"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}
    gateway.provider.queue(Reply(body=models))
    async with openai.AsyncOpenAI(base_url=gateway.openai_base, api_key="sk-x") as sdk:
        listed = await sdk.models.list()
    assert [m.id for m in listed.data] == ["gpt-4o"]
    assert gateway.provider.received[0].path == "/v1/models"
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert (step["protocol"], step["http_status"], step["stop_reason"]) == (
        "passthrough",
        200,
        "completed",
    )


async def test_explicit_trace_header(gateway: Gateway) -> None:
    gateway.provider.queue(completion("one"), completion("two"))
    for _ in range(2):
        status, headers, _ = await post(gateway, HELLO, **{"X-Loopwatch-Trace-Id": "run:42"})
        assert status == 200 and headers["X-Loopwatch-Trace-Id"] == "run:42"
    trace = await gateway.trace("run:42")
    assert trace["step_count"] == 2
    status, headers, raw = await post(gateway, HELLO, **{"X-Loopwatch-Trace-Id": "bad id!"})
    assert status == 400 and "X-Loopwatch-Trace-Id" in json.loads(raw)["error"]["message"]
    # Refused in a trace of its own (the header names none it could use), never silently.
    assert headers["X-Loopwatch-Trace-Id"] != "bad id!"
    trace = await refused_trace(gateway, headers)
    assert [v["kind"] for v in trace["violations"]] == ["invalid_request"]


async def test_reasoning_text_never_reaches_the_database(
    gateway: Gateway, database_url: str
) -> None:
    marker = "CHAIN-OF-THOUGHT-MARKER-8d1f"
    gateway.provider.queue(
        streamed("Answer.", reasoning=f"thinking {marker} hard", use=usage(5, 40, reasoning=30))
    )
    _, _, seen = await post(gateway, {**HELLO, "stream": True})
    reasoning_seen = "".join(
        json.loads(line[6:])["choices"][0]["delta"].get("reasoning_content", "")
        for line in seen.decode().split("\n\n")
        if line.startswith("data: {") and json.loads(line[6:])["choices"]
    )
    assert marker in reasoning_seen  # the client gets the reasoning untouched
    trace = await gateway.trace((await gateway.traces())[0]["id"])
    reasoning = [i for i in trace["steps"][0]["output_items"] if i["kind"] == "reasoning"]
    assert reasoning and reasoning[0]["attrs"]["tokens"] == 30 and not reasoning[0]["text"]
    assert marker.encode() not in database_bytes(database_url)


async def test_secrets_are_redacted_before_storage(gateway: Gateway, database_url: str) -> None:
    gateway.provider.queue(completion("Mail me at jane.doe@example.com"))
    body = chat_request("my key is sk-proj-abcdefghijklmnopqrstuvwxyz123456 ok")
    status, _, _ = await post(gateway, body, Authorization="Bearer sk-live-secretvalue0123456789")
    assert status == 200
    trace = await gateway.trace((await gateway.traces())[0]["id"])
    step = trace["steps"][0]
    assert "[REDACTED:" in step["input_items"][0]["text"]
    assert "[REDACTED:email]" in step["output_items"][0]["text"]
    stored = database_bytes(database_url)
    for secret in (
        b"abcdefghijklmnopqrstuvwxyz123456",
        b"jane.doe@example.com",
        b"secretvalue0123456789",
    ):
        assert secret not in stored


def database_bytes(database_url: str) -> bytes:
    """Everything SQLite holds on disk: the database file and its write-ahead log."""
    path = Path(database_url.removeprefix("sqlite:///"))
    return b"".join(
        p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists()
    )


async def test_compressed_body_is_forwarded_as_sent_and_still_recorded(gateway: Gateway) -> None:
    reply = completion("compressed answer")
    reply.gzip = True
    gateway.provider.queue(reply)
    async with (
        aiohttp.ClientSession(auto_decompress=False) as s,
        s.post(
            gateway.openai_base + "/chat/completions",
            json=HELLO,
            headers={"Accept-Encoding": "gzip"},
        ) as r,
    ):
        raw = await r.read()
        assert r.headers["Content-Encoding"] == "gzip"
    assert (
        json.loads(gzip.decompress(raw))["choices"][0]["message"]["content"] == "compressed answer"
    )
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert step["output_items"][0]["text"] == "compressed answer"


async def test_provider_silent_past_read_timeout_gives_504(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw = await make_gateway(read_timeout=0.3)
    reply = completion("too late")
    reply.delay = 2
    gw.provider.queue(reply)
    status, _, raw = await post(gw, HELLO)
    assert status == 504
    assert json.loads(raw)["error"]["code"] == "upstream_timeout"
    step = (await gw.trace((await gw.traces())[0]["id"]))["steps"][0]
    assert step["stop_reason"] == "error" and step["http_status"] == 504


async def test_deeply_nested_provider_body_is_forwarded_and_still_recorded(
    gateway: Gateway,
) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    # Chunked, so the body is parsed only when the step is completed.
    gateway.provider.queue(Reply(events=[nested], content_type="application/json"))
    status, _, raw = await post(gateway, HELLO)
    assert status == 200 and raw == nested
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert step["http_status"] == 200 and step["output_items"] == []


async def test_path_and_query_are_forwarded_as_encoded(gateway: Gateway) -> None:
    gateway.provider.queue(Reply(body={"ok": True}))
    target = "/v1/files/a%2Fb%3Fc?q=a%26b%3D1&x=%23y"
    async with (
        aiohttp.ClientSession() as s,
        s.get(yarl.URL(gateway.url + target, encoded=True)) as r,
    ):
        assert r.status == 200
    assert gateway.provider.received[0].raw_target == target


@pytest.mark.parametrize("path", ["/v1/../admin", "/v1/%2e%2e/%2E%2E/admin", "/v1/./models"])
async def test_dot_segments_never_leave_the_api_base(gateway: Gateway, path: str) -> None:
    async with (
        aiohttp.ClientSession() as s,
        s.get(yarl.URL(gateway.url + path, encoded=True)) as r,
    ):
        assert r.status == 400
        assert (await r.json())["error"]["code"] == "invalid_request"
        trace_id = r.headers["X-Loopwatch-Trace-Id"]
    assert gateway.provider.received == []
    await gateway.flush()
    trace = await gateway.trace(trace_id)
    assert [v["kind"] for v in trace["violations"]] == ["invalid_request"]


async def test_a_timeout_names_the_provider_without_the_query(
    make_gateway: GatewayFactory, database_url: str
) -> None:
    gw = await make_gateway(read_timeout=0.3)
    gw.provider.queue(Reply(body={"data": []}, delay=2))
    secret = "AIzaSyQueryKey0123456789abcdef"
    async with (
        aiohttp.ClientSession() as s,
        s.get(gw.openai_base + f"/models?key={secret}") as r,
    ):
        assert r.status == 504
        error = (await r.json())["error"]
    assert error["code"] == "upstream_timeout" and "127.0.0.1" in error["message"]
    assert secret not in error["message"]
    await gw.flush()
    assert secret.encode() not in database_bytes(database_url)


async def test_large_body_arrives_whole_and_unchanged(gateway: Gateway) -> None:
    gateway.provider.queue(completion("read it all"))
    history = [{"role": "user", "content": f"chunk {i} " + "x" * 1000} for i in range(3000)]
    body = json.dumps({"model": "gpt-4o", "messages": history}).encode()  # about 3 MB
    status, _, _ = await post(gateway, body)
    assert status == 200
    received = gateway.provider.received[0]
    assert received.body == body
    assert received.headers.get("Content-Length") == str(len(body))
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert len(step["input_items"]) == 3000


async def test_passthrough_upload_keeps_its_length(gateway: Gateway) -> None:
    gateway.provider.queue(Reply(body={"id": "file-1", "object": "file"}))
    upload = b"x" * 300_000
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            gateway.openai_base + "/files",
            data=upload,
            headers={"Content-Type": "application/octet-stream"},
        ) as r,
    ):
        assert r.status == 200
    received = gateway.provider.received[0]
    assert received.body == upload
    assert received.headers.get("Content-Length") == str(len(upload))
    assert "Transfer-Encoding" not in received.headers


@pytest.mark.parametrize("client_asked_usage", [True, False], ids=["as-is", "usage-hidden"])
async def test_hostile_stream_is_forwarded_byte_for_byte_and_recorded(
    gateway: Gateway, client_asked_usage: bool
) -> None:
    huge = b"data: " + b"A" * (9 * 1024 * 1024) + b"\n\n"  # one event past the decoder's cap
    events = [
        b": keep-alive\r\n\r\n",
        b"data: {not json at all\n\n",
        b"event: mystery\ndata: [1, 2, 3]\n\n",
        huge,
        b"data: \xff\xfe invalid utf-8\n\n",
        *stream_chunks("still fine"),
    ]
    gateway.provider.queue(Reply(events=events))
    body: dict[str, Any] = {**HELLO, "stream": True}
    if client_asked_usage:
        body["stream_options"] = {"include_usage": True}
    status, _, raw = await post(gateway, body)
    assert status == 200
    usage_event = events[-2]  # the usage-only chunk before [DONE]
    expected = events if client_asked_usage else [e for e in events if e is not usage_event]
    assert raw == b"".join(expected)
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert step["output_items"][0]["text"] == "still fine"
    assert step["usage"]["total_tokens"] == 30
    assert step["stop_reason"] == "completed"
