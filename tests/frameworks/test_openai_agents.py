"""The OpenAI Agents SDK through the gateway: its default Responses model and its Chat
Completions model, streamed and not, each run one clean trace; an orchestrator calling an
agent as a tool is one tree of two runs, a handoff one run."""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("agents", reason=NEEDS_EXTRA)

import openai
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)

from tests import trees
from tests.fakes.script import (
    EXPECTED_RESEARCH_ANSWER,
    RESEARCH_TASK,
    RESEARCH_TOOL,
    Call,
    Crew,
    Script,
    final_answer,
    research_crew,
)
from tests.fakes.scripted import ScriptedModel
from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    assert_one_clean_trace,
    time_tool,
    tool_arguments,
    weather_tool,
)
from tests.harness import Gateway, GatewayFactory

pytestmark = [pytest.mark.frameworks]


@function_tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return weather_tool(city)


@function_tool
def get_time(city: str) -> str:
    """The local time of a city."""
    return time_tool(city)


Model = OpenAIResponsesModel | OpenAIChatCompletionsModel


def model_of(gw: Gateway, api: str) -> Model:
    client = gw.closing(
        openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-agents", max_retries=0)
    )
    if api == "responses":
        return OpenAIResponsesModel(model="gpt-5", openai_client=client)
    return OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)


def agent(gw: Gateway, api: str) -> Agent:
    return Agent(
        name="travel",
        instructions=INSTRUCTIONS,
        model=model_of(gw, api),
        tools=[get_weather, get_time],
    )


async def run(gw: Gateway, api: str, *, stream: bool) -> str:
    # Traces of the SDK's own would go to OpenAI's servers: off, as nothing leaves this machine.
    config = RunConfig(tracing_disabled=True)
    if not stream:
        result = await Runner.run(agent(gw, api), QUESTION, run_config=config)
        return str(result.final_output)
    streamed = Runner.run_streamed(agent(gw, api), QUESTION, run_config=config)
    async for _ in streamed.stream_events():
        pass
    return str(streamed.final_output)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_agent_run_is_one_clean_trace(
    gateway: Gateway, api: str, stream: bool, steps: int
) -> None:
    answer = await run(gateway, api, stream=stream)
    assert answer == EXPECTED_ANSWER
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol=api, stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS


ORCHESTRATOR = "Hand research to the research tool, then answer from what it found."
NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_agent_as_tool_is_a_child_run_of_its_call(
    make_gateway: GatewayFactory, api: str, parallel: bool
) -> None:
    """The orchestrator's model calls the tool `agent.as_tool()` made, with RESEARCH_TASK as
    its `input`; the SDK starts the research agent's own run with exactly that text as its
    user turn. One tree: the call's child run did the weather-and-time loop."""
    gw = await make_gateway()
    gw.provider.responder = ScriptedModel(research_crew(parallel=parallel))
    model = model_of(gw, api)
    researcher = Agent(
        name="researcher", instructions=INSTRUCTIONS, model=model, tools=[get_weather, get_time]
    )
    # The nested run's own configuration: no SDK traces sent to OpenAI from it either.
    tool = researcher.as_tool(RESEARCH_TOOL, "Researches weather and time.", run_config=NO_TRACING)
    orchestrator = Agent(name="orchestrator", instructions=ORCHESTRATOR, model=model, tools=[tool])
    result = await Runner.run(orchestrator, QUESTION, run_config=NO_TRACING)
    assert result.final_output == EXPECTED_RESEARCH_ANSWER

    root, (child,) = await trees.assert_one_root_with_children(gw, RESEARCH_TOOL, children=1)
    assert tool_arguments(root) == [(RESEARCH_TOOL, {"input": RESEARCH_TASK})]
    assert tool_arguments(child) == EXPECTED_CALLS
    assert child["first_user_text"] == RESEARCH_TASK
    assert (root["step_count"], child["step_count"]) == (2, 2 if parallel else 3)
    assert (root["status"], child["status"]) == ("completed", "completed")
    assert root["violation_count"] == child["violation_count"] == 0
    trees.assert_tree_totals(root, [root, child])


HANDOFF = "transfer_to_weather"  # the SDK's tool name for a handoff to the agent `weather`


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_handoff_continues_the_same_run(make_gateway: GatewayFactory, api: str) -> None:
    """A handoff is no sub-agent: the agent handed to takes over the same conversation, its
    first request carrying the whole history with the handoff call and its result. The run
    stays one trace, its handoff call answered in the next step, with no child."""
    gw = await make_gateway()
    handoff = Call(HANDOFF, {})
    weather_rounds = Script([[handoff], [Call("get_weather", {"city": "Paris"})]])
    crew = Crew({HANDOFF: Script([[handoff]])}, weather_rounds)
    gw.provider.responder = ScriptedModel(crew)
    model = model_of(gw, api)
    weather = Agent(name="weather", instructions=INSTRUCTIONS, model=model, tools=[get_weather])
    triage = Agent(name="triage", instructions=ORCHESTRATOR, model=model, handoffs=[weather])
    result = await Runner.run(triage, QUESTION, run_config=NO_TRACING)
    assert result.final_output == final_answer(['{"assistant": "weather"}', weather_tool("Paris")])

    (listed,) = await gw.traces(include_children="true")
    trace = await gw.trace(listed["id"])
    assert [name for name, _ in tool_arguments(trace)] == [HANDOFF, "get_weather"]
    assert trace["step_count"] == 3 and trace["status"] == "completed"
    assert (trace["parent"], trace["children"], trace["tree"]["traces"]) == (None, [], 1)
    assert trace["violation_count"] == 0
