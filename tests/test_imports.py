"""The tree is the data flow: the package contracts in pyproject.toml hold.

Layers, what the store, sinks and read side never import, who alone drives the exchange, a
sans-IO layer 1, and no import circle (typing-only imports count). The report names every
import that breaks a contract.
"""

from __future__ import annotations

from pathlib import Path

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
