"""Whole-gateway runs live in tests/e2e/ (and in tests/agent_clis/ and tests/frameworks/, named
for the real clients they drive): every other test checks its package's pieces."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
WHOLE_GATEWAY_HOMES = ("e2e", "agent_clis", "frameworks")
# The fixtures that start a gateway, by the names tests ask for them.
FIXTURES = {"gateway", "make_gateway", "mcp_gateway", "loopwatch"}
# What starts one otherwise: the harness's factory, `loopwatch serve` as a subprocess, the app
# or its server built by hand, the demo.
STARTERS = {
    "tests.harness": {"gateway", "make_gateway", "GatewayFactory"},
    "tests.processes": {"serving", "Served"},
    "tests.e2e.mcp.mcp_harness": {"mcp_gateway"},
    "gateway.app": {"create_app"},
    "gateway.ops.serving": {"running"},
    "gateway.demo.main": {"serve_demo"},
    "gateway.testing.running": {"run_for_test"},
}


def _test_modules() -> list[Path]:
    return sorted(
        path
        for pattern in ("test_*.py", "conftest.py")
        for path in TESTS.rglob(pattern)
        if "node_modules" not in path.parts
    )


def starts_a_gateway(path: Path) -> list[str]:
    """What in the module starts a whole gateway (empty when nothing does)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in STARTERS:
            found += [f"imports {a.name}" for a in node.names if a.name in STARTERS[node.module]]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "harness" and node.attr in STARTERS["tests.harness"]:
                found.append(f"uses harness.{node.attr}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            found += [f"{node.name} asks for {a.arg}" for a in arguments if a.arg in FIXTURES]
    return found


def test_only_the_whole_gateway_folders_start_a_gateway() -> None:
    outside = {
        str(path.relative_to(TESTS)): found
        for path in _test_modules()
        if path.relative_to(TESTS).parts[0] not in WHOLE_GATEWAY_HOMES
        and (found := starts_a_gateway(path))
    }
    assert not outside, f"whole-gateway tests belong in tests/e2e/: {outside}"


def test_the_check_sees_each_way_of_starting_a_gateway() -> None:
    e2e = TESTS / "e2e"
    assert starts_a_gateway(e2e / "proxy" / "test_proxy_chat.py")  # the fixtures
    assert starts_a_gateway(e2e / "ops" / "test_serving.py")  # `loopwatch serve`
    assert starts_a_gateway(e2e / "ops" / "test_http_server.py")  # its server by hand
    assert starts_a_gateway(e2e / "demo" / "test_demo.py")  # the demo
    assert starts_a_gateway(e2e / "mcp" / "test_mcp_proxy.py")  # the MCP gateway
    assert starts_a_gateway(e2e / "demo" / "test_demo_with_plugin.py")  # the pytest plugin
