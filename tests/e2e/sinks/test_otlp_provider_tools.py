"""OTLP export of tools the provider ran inside its answer: each an `execute_tool` span, child
of its step's span, zero-length at the step's end, an error when its result is; never a tool
span across steps, even when the client sends the provider's blocks back as new."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests import harness
from tests.e2e.sinks.test_otlp import collector, exported, only_trace, otlp_gateway  # noqa: F401
from tests.fakes import anthropic as anth
from tests.fakes.collector import FakeCollector, ReceivedSpan
from tests.harness import Gateway, GatewayFactory

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway = harness.make_gateway

SEARCH, FAILED = "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE", "srvtoolu_01Q8VbnWc4nYtJ3sbS2Ue6Fg"
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
QUESTION = {"role": "user", "content": "What did the ESA announce this week?"}
ANSWER = [
    anth.server_tool_use(SEARCH, "web_search", {"query": "ESA news"}),
    anth.web_search_result(SEARCH, ("ESA launches probe", "https://www.esa.int/probe")),
    anth.server_tool_use(FAILED, "web_search", {"query": "ESA budget"}),
    anth.web_search_error(FAILED, "max_uses_exceeded"),
    anth.text("This week the ESA launched a probe."),
]


def sdk(gw: Gateway, **headers: str) -> anthropic.AsyncAnthropic:
    return gw.closing(
        anthropic.AsyncAnthropic(
            base_url=gw.url, api_key="sk-ant-x", max_retries=0, default_headers=headers or None
        )
    )


async def ask(client: anthropic.AsyncAnthropic, stream: bool, messages: list[Any]) -> Any:
    params: dict[str, Any] = {"model": anth.MODEL, "max_tokens": 512, "tools": [WEB_SEARCH]}
    if not stream:
        return await client.messages.create(messages=messages, **params)
    async with client.messages.stream(messages=messages, **params) as events:
        return await events.get_final_message()


def tools_of(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_each_search_the_provider_ran_is_a_child_span_of_its_step(
    make_gateway: GatewayFactory, collector: FakeCollector, stream: bool
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    make = anth.streamed if stream else anth.reply
    gw.provider.queue(make(anth.message(ANSWER)), make(anth.message([anth.text("Tuesday.")])))
    client = sdk(gw)
    reply = await ask(client, stream, [QUESTION])
    history: list[Any] = [QUESTION, {"role": "assistant", "content": reply.content}]
    await ask(client, stream, [*history, {"role": "user", "content": "When?"}])

    spans = await exported(gw, collector)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    first, second = sorted(chats, key=lambda s: s.start_ns)
    ran = tools_of(spans)
    assert [s.attributes["gen_ai.tool.call.id"] for s in ran] == [SEARCH, FAILED]
    for span in ran:
        assert span.name == "execute_tool web_search" and span.kind == "internal"
        assert span.trace_id == first.trace_id and span.parent_id == first.span_id
        assert span.start_ns == span.end_ns == first.end_ns  # no time the provider told
        assert span.attributes["gen_ai.tool.name"] == "web_search"
        assert span.attributes["gen_ai.tool.type"] == "extension"  # run at the agent's side
        assert span.attributes["loopwatch.tool.type"] == "web_search"
        assert span.attributes["loopwatch.tool.executed_by"] == "provider"
    found, failed = ran
    assert not found.error and "error.type" not in found.attributes
    assert failed.error and failed.status_message == "tool_error"
    assert failed.attributes["error.type"] == "tool_error"
    assert not [s for s in failed.strings() if "max_uses" in s]  # no result text exported
    # Nothing is owed for them: no tool span reaches the next step.
    assert second.parent_id == "" and second.attributes["gen_ai.conversation.id"] == (
        await only_trace(gw)
    )
    assert len(spans) == 4


async def test_provider_blocks_sent_back_as_new_make_no_tool_span(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    """The client edits the answer it sends back, so its blocks (the provider's call and
    result among them) are new input of the next step: still no `execute_tool` span for
    them, whose time was the model's, not the agent's."""
    gw = await otlp_gateway(make_gateway, collector)
    gw.provider.queue(
        anth.reply(anth.message(ANSWER)), anth.reply(anth.message([anth.text("Tuesday.")]))
    )
    client = sdk(gw, **{"X-Loopwatch-Trace-Id": "otlp-edited-echo"})
    reply = await ask(client, False, [QUESTION])
    edited = [b.model_dump(exclude_none=True) for b in reply.content]
    edited[-1]["text"] = "The ESA launched something."
    history: list[Any] = [QUESTION, {"role": "assistant", "content": edited}]
    await ask(client, False, [*history, {"role": "user", "content": "When?"}])

    second = (await gw.trace("otlp-edited-echo"))["steps"][1]
    sent_back = [i for i in second["input_items"] if i["attrs"].get("executed_by")]
    assert "tool_result" in [i["kind"] for i in sent_back], second["input_items"]
    spans = await exported(gw, collector)
    chats = sorted(
        (s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"),
        key=lambda s: s.start_ns,
    )
    assert [s.parent_id for s in tools_of(spans)] == [chats[0].span_id] * 2
    assert len(spans) == 4
