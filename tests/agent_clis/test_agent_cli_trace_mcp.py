"""Claude Code asks the gateway why a run failed: given a `.mcp.json` naming the trace MCP
server (`/api/mcp/traces`), `claude -p` lets the scripted model call `explain_run` for a failed
run's id, and its final answer carries what the tool said: the run's failure and where."""

from __future__ import annotations

import json

import pytest

from tests.agent_clis import clients
from tests.agent_clis.runner import CallHome, Sandbox, install_problem, run
from tests.e2e.mcp.traces_seed import FAILURE, failed_run
from tests.fakes.scripted_agent import EXPLAINED_PREFIX, AgentModel
from tests.harness import Gateway

pytestmark = [
    pytest.mark.agents,
    pytest.mark.skipif(
        install_problem("claude") is not None, reason=str(install_problem("claude"))
    ),
]

SERVER = "loopwatch"


async def test_claude_code_explains_a_failed_run_through_the_trace_server(
    gateway: Gateway, sandbox: Sandbox, call_home: CallHome
) -> None:
    failed = await failed_run(gateway)
    await gateway.flush()
    config = sandbox.cwd / ".mcp.json"
    server = {"type": "http", "url": f"{gateway.url}/api/mcp/traces"}
    config.write_text(json.dumps({"mcpServers": {SERVER: server}}, indent=2))
    argv = clients.claude_code(sandbox, gateway.url, f"Why did my run {failed} fail?")
    argv += [f"mcp__{SERVER}__explain_run", "--mcp-config", str(config), "--strict-mcp-config"]
    # MCP tools declared up front, not behind Claude Code's tool search: the scripted model
    # calls the tool it is shown.
    sandbox.env["ENABLE_TOOL_SEARCH"] = "false"
    finished = await run(argv, sandbox)

    model = gateway.provider.responder
    assert isinstance(model, AgentModel)
    assert finished.returncode == 0, finished.explain()
    assert "explain" in [seen.move for seen in model.seen], (model.seen, finished.explain())
    answer = model.final_text()
    assert answer.startswith(EXPLAINED_PREFIX), (answer, finished.explain())
    assert f"Run {failed} failed at step 2 of 2" in answer and FAILURE in answer
    assert FAILURE in finished.stdout, finished.explain()
    assert call_home.requests == [], f"calls home: {call_home.requests}"
