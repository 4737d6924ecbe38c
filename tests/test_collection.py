"""The suite collects with and without the optional extras: no test folder hides a package
that a test skips without (`pytest.importorskip`)."""

from __future__ import annotations

import ast
import os
from importlib.machinery import PathFinder
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _skipped_without() -> set[str]:
    """The top-level packages the suite's `importorskip` calls ask for."""
    names: set[str] = set()
    for folder, subfolders, files in os.walk(TESTS):
        subfolders[:] = [d for d in subfolders if d not in ("node_modules", "__pycache__")]
        for name in files:
            if not name.endswith(".py"):
                continue
            tree = ast.parse(Path(folder, name).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "importorskip"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                ):
                    names.add(str(node.args[0].value).split(".")[0])
    return names


def test_no_test_folder_is_named_like_a_package_the_suite_may_lack() -> None:
    # tests/conftest.py is in no package, so pytest puts tests/ on sys.path, where any
    # folder imports as a namespace package: one named `agents` made
    # importorskip("agents") import the folder when openai-agents was absent, and
    # collection failed instead of skipping.
    wanted = _skipped_without()
    assert "agents" in wanted  # the scan sees the framework tests' checks
    # tests/e2e/conftest.py is in no package either: tests/e2e/ is on sys.path too.
    roots = [str(TESTS), str(TESTS / "e2e")]
    shadowed = sorted(name for name in wanted if PathFinder.find_spec(name, roots))
    assert not shadowed, f"folders or modules in tests/ named like optional packages: {shadowed}"


def test_no_two_test_modules_share_a_name() -> None:
    """Test folders are no packages: pytest imports each test module by its file name, so a
    second module of the same name stops the whole run at collection."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if "node_modules" in path.parts:
            continue
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(TESTS)} and {path.relative_to(TESTS)}")
        seen.setdefault(path.name, path)
    assert clashes == []
