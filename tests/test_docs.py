"""README documents every setting, its environment twin, and the test command CI runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ENV_SETTINGS, Settings, env_name

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("setting", sorted(Settings.model_fields))
def test_every_setting_is_documented(setting: str) -> None:
    assert f"| `{setting}` |" in README, f"README settings table lacks {setting}"


@pytest.mark.parametrize("setting", ENV_SETTINGS)
def test_every_environment_variable_is_documented(setting: str) -> None:
    assert f"`{env_name(setting)}`" in README


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "bash .ci/run" in README
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()
