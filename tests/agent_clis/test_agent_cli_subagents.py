"""Claude Code with a sub-agent: `claude -p` asked to have the work done by a sub-agent starts
one with its `Agent` tool, in the foreground (the call's result is the sub-agent's report) or
in the background (the call is answered at launch, the report comes later as a user turn).
The sub-agent's own loop runs the shell tool. The run is one tree: a root whose `Agent` call
has its child run linked both ways, the tree's totals the sums of the two runs'."""

from __future__ import annotations

import pytest

from tests import trees
from tests.agent_clis import checks, clients
from tests.agent_clis.runner import CallHome, Sandbox, install_problem, run
from tests.fakes.scripted_agent import (
    BACKGROUND_PROMPT,
    DELEGATING_PROMPT,
    WAITING,
    AgentModel,
    final_answer,
)
from tests.harness import Gateway

pytestmark = [
    pytest.mark.agents,
    pytest.mark.skipif(
        install_problem("claude") is not None, reason=str(install_problem("claude"))
    ),
]

# prompt: (the model's moves in the parent's loop, the parent's steps)
RUNS = {
    "foreground": (DELEGATING_PROMPT, ["delegate", "final"]),
    "background": (BACKGROUND_PROMPT, ["delegate", "wait", "final"]),
}


@pytest.mark.parametrize("mode", sorted(RUNS))
async def test_sub_agent_is_a_child_run_of_the_agent_call(
    gateway: Gateway, sandbox: Sandbox, call_home: CallHome, database_url: str, mode: str
) -> None:
    prompt, parent_moves = RUNS[mode]
    finished = await run(clients.claude_code(sandbox, gateway.url, prompt), sandbox)
    model = gateway.provider.responder
    assert isinstance(model, AgentModel)
    checks.assert_ran(finished, sandbox, call_home, model, output=True)
    if mode == "background":
        assert WAITING in finished.stdout, finished.explain()
    # The sub-agent's loop: the shell call and its report; the parent's around it.
    moves = [seen.move for seen in model.seen if seen.move not in ("side", "other")]
    assert sorted(moves) == sorted([*parent_moves, "call", "final"]), model.seen

    root, (child,) = await trees.assert_one_root_with_children(gateway, "Agent", children=1)
    everything = checks.describe([root, child])
    assert root["step_count"] == len(parent_moves), everything
    assert child["step_count"] == 2 and trees.calls_to(child, "Bash"), everything
    assert (root["status"], child["status"]) == ("completed", "completed"), everything
    assert root["violation_count"] == child["violation_count"] == 0, everything
    trees.assert_tree_totals(root, [root, child])
    assert model.final_text() == final_answer("loopwatch-ok")
    checks.assert_no_thought_stored(database_url)
