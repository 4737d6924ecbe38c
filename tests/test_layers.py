"""The tree is the data flow: each module imports only its own layer or lower ones.

Layer 1 is sans-IO (no aiohttp, SQL or Prometheus), and protocol adapters never import
each other. A new module must be placed in a layer here before it can land.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "gateway"

LAYERS: dict[str, int] = {
    "gateway": 0,
    "gateway.__main__": 5,
    "gateway.config": 0,
    "gateway.errors": 0,
    "gateway.items": 0,
    "gateway.ids": 0,
    "gateway.stream": 1,
    "gateway.protocols": 1,
    "gateway.step": 1,
    "gateway.threading": 1,
    "gateway.pairing": 1,
    "gateway.budgets": 1,
    "gateway.redaction": 1,
    "gateway.output_checks": 1,
    "gateway.pricing": 1,
    "gateway.price_formula": 1,
    "gateway.tool_checks": 1,
    "gateway.loops": 1,
    "gateway.trace_status": 1,
    "gateway.sessions": 1,
    "gateway.routing": 1,
    "gateway.tap": 1,
    "gateway.stops": 1,
    "gateway.exchange": 1,
    "gateway.jsoncodec": 0,
    "gateway.upstream": 2,
    "gateway.metrics": 2,
    "gateway.store": 2,
    "gateway.recorder": 3,
    "gateway.recording": 3,
    "gateway.recorder_process": 3,
    "gateway.spool": 2,
    "gateway.records": 1,
    "gateway.keyfilter": 1,
    "gateway.keycache": 1,
    "gateway.sinks": 3,
    "gateway.webhooks": 3,
    "gateway.retention": 3,
    "gateway.otlp": 3,
    "gateway.deps": 4,
    "gateway.proxy": 4,
    "gateway.placement": 4,
    "gateway.admission": 4,
    "gateway.relay": 4,
    "gateway.finisher": 4,
    "gateway.ui": 4,
    "gateway.logs": 4,
    "gateway.http_server": 4,
    "gateway.readiness": 4,
    "gateway.app": 5,
    "gateway.cli": 5,
    "gateway.serving": 5,
    "gateway.workers": 5,
    "gateway.demo": 5,
    "gateway.mcp": 1,
    "gateway.mcp.tables": 2,
    "gateway.mcp.reads": 2,
    "gateway.mcp.purge": 2,
    "gateway.mcp.writer": 3,
    "gateway.mcp.proxy": 4,
    "gateway.mcp.runtime": 4,
    "gateway.mcp.ingest": 4,
    "gateway.mcp.stdio": 5,
}
IO_LIBRARIES = ("aiohttp", "sqlalchemy", "sqlmodel", "prometheus_client", "psycopg")


def layer_of(module: str) -> int:
    best = max(
        (name for name in LAYERS if module == name or module.startswith(name + ".")), key=len
    )
    return LAYERS[best]


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path))
    return found


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_imports_flow_downwards(module: str, path: Path) -> None:
    own = layer_of(module)
    for imported in imports(path):
        if imported.startswith("gateway.") and imported.split(".")[1] in {
            p.stem for p in ROOT.iterdir()
        }:
            target = layer_of(imported)
            assert target <= own, f"{module} (layer {own}) imports {imported} (layer {target})"
        if own == 1:
            assert not imported.startswith(IO_LIBRARIES), f"sans-IO {module} imports {imported}"
        if module.startswith("gateway.protocols.") and imported.startswith("gateway.protocols."):
            target_module = ".".join(imported.split(".")[:3])
            own_family = _family(target_module) in {_family(module), "gateway.protocols.base"}
            assert own_family or module.endswith("registry"), f"{module} imports {imported}"


def _family(module: str) -> str:
    """An adapter and its helper modules (`x_decode`, `x_events`) are one family."""
    for suffix in ("_decode", "_events"):
        module = module.removesuffix(suffix)
    return module
