"""Small modules, short functions: no module of gateway/ over 400 lines, no function or
method over 50 (from its first decorator to its last line, docstring included)."""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[1] / "gateway"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
MODULES = sorted(GATEWAY.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(GATEWAY.parent))


def _long_functions(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{node.name} (line {node.lineno}): {length} lines")
    return found


def test_every_module_and_function_is_small() -> None:
    too_long = []
    for path in MODULES:
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{_name(path)}: {lines} lines")
        too_long += [f"{_name(path)}: {f}" for f in _long_functions(ast.parse(text))]
    assert too_long == [], "split by responsibility"


def test_the_check_sees_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"@decorated\ndef long() -> None:\n{body}\n"
    assert _long_functions(ast.parse(source)) == ["long (line 2): 52 lines"]
    assert len(MODULES) > 100, "the check walks all of gateway/"
