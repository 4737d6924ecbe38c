"""The tree is the data flow: the package contracts in pyproject.toml hold.

Layers, what the store, sinks and read side never import, who alone drives the exchange, a
sans-IO layer 1, and no import circle (typing-only imports count), a package and its own
modules included. The report names every import that breaks a contract.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure

ROOT = Path(__file__).resolve().parents[1]


def test_package_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    configure()  # import-linter's readers and printer, as its command line sets them
    kept = lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert kept, report
    assert "0 broken" in report


def test_no_package_init_imports_its_own_modules() -> None:
    """Python imports a package before any module in it, so an `__init__` importing its own
    modules is in a circle with each that reads the package (`from gateway.demo import
    client`); import-linter's circles are between siblings and miss this one."""
    graph = grimp.build_graph("gateway", cache_dir=None)
    circles = sorted(
        f"{package} imports {module}"
        for package in graph.modules
        if graph.find_children(package)
        for module in graph.find_modules_directly_imported_by(package)
        if module.startswith(package + ".")
    )
    assert not circles, circles
