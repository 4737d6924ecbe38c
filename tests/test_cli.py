"""The command line: `--version` and what the commands refuse."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from gateway.cli import main


def test_version_flag_prints_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"loopwatch {metadata.version('loopwatch')}\n"


def test_installed_command_prints_its_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loopwatch " + metadata.version("loopwatch")
    assert result.stderr == ""
