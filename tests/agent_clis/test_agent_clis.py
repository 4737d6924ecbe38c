"""The agent CLIs people run, in their default modes, through the gateway: Claude Code, Codex
CLI (over HTTP and over a WebSocket), qwen-code and opencode, each asked to run one shell
command and report what it printed, against a scripted model that calls the shell tool the
client declares."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.agent_clis import checks, clients
from tests.agent_clis.runner import CallHome, Sandbox, install_problem, run
from tests.fakes.scripted_agent import AgentModel
from tests.harness import Gateway

Client = Callable[[Sandbox, str], list[str]]


def _client(name: str, setup: Client, binary: str, *, output: bool = True) -> object:
    problem = install_problem(binary)
    marks = [pytest.mark.skipif(problem is not None, reason=str(problem))]
    return pytest.param(setup, output, marks=marks, id=name)


CLIENTS = [
    _client("claude-code", clients.claude_code, "claude"),
    _client("codex", clients.codex, "codex"),
    # qwen-code 0.24 headless passes on "Output: (empty)" for this command (the file is written).
    _client("qwen-code", clients.qwen_code, "qwen", output=False),
    _client("opencode", clients.opencode, "opencode"),
]

pytestmark = pytest.mark.agents


@pytest.mark.parametrize(("setup", "output"), CLIENTS)
async def test_run_is_one_clean_trace(
    gateway: Gateway,
    sandbox: Sandbox,
    call_home: CallHome,
    database_url: str,
    setup: Client,
    output: bool,
) -> None:
    finished = await run(setup(sandbox, gateway.url), sandbox)
    model = gateway.provider.responder
    assert isinstance(model, AgentModel)
    checks.assert_ran(finished, sandbox, call_home, model, output=output)
    checks.assert_model_saw_one_loop(model)
    await checks.assert_one_clean_trace(gateway, model)
    checks.assert_no_thought_stored(database_url)


@pytest.mark.skipif(install_problem("codex") is not None, reason=str(install_problem("codex")))
async def test_codex_over_a_websocket_is_recorded_from_its_frames(
    gateway: Gateway, sandbox: Sandbox, call_home: CallHome, database_url: str
) -> None:
    """Codex with WebSockets on (its built-in OpenAI provider's default) warms the socket up,
    then sends each turn as a `response.create` frame continuing the last response: the run
    is the same one clean trace, and no request went over HTTP (no fallback)."""
    finished = await run(clients.codex_websocket(sandbox, gateway.url), sandbox)
    model = gateway.provider.responder
    assert isinstance(model, AgentModel)
    checks.assert_ran(finished, sandbox, call_home, model, output=True)
    checks.assert_model_saw_one_loop(model)
    main = await checks.assert_one_clean_trace(gateway, model)
    fake = gateway.provider.socket
    assert fake.upgrades, finished.explain()
    posted = [r.path for r in gateway.provider.received if r.method == "POST"]
    assert "/v1/responses" not in posted, posted
    # Every step was a frame on the socket: the warm-up, then one frame a model request.
    assert (
        len(fake.requests)
        == len(model.seen)
        == sum(t["step_count"] for t in await checks.all_traces(gateway))
    )
    assert main["step_count"] == 2
    checks.assert_no_thought_stored(database_url)
