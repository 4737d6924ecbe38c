"""README documents every setting, its environment twin, the test command CI runs, the layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import FILE_ONLY, Settings
from gateway.config_load import ENV_SETTINGS, OTEL_ENV, env_name

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("setting", sorted(Settings.model_fields))
def test_every_setting_is_documented(setting: str) -> None:
    assert f"| `{setting}` |" in README, f"README settings table lacks {setting}"


@pytest.mark.parametrize("setting", ENV_SETTINGS)
def test_every_environment_variable_is_documented(setting: str) -> None:
    assert f"`{env_name(setting)}`" in README


def _environment_column() -> dict[str, str]:
    """README's settings table: each setting's environment column."""
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", README, flags=re.MULTILINE)
    return {name: column.strip() for name, column in rows if name in Settings.model_fields}


@pytest.mark.parametrize("setting", sorted(Settings.model_fields))
def test_every_setting_has_its_environment_name_or_is_declared_file_only(setting: str) -> None:
    """The environment names are derived from the declaration: a setting cannot be added
    without one unless it is marked FILE_ONLY, and README's column says which."""
    file_only = FILE_ONLY in Settings.model_fields[setting].metadata
    assert (setting in ENV_SETTINGS) is not file_only
    column = _environment_column()[setting]
    if file_only:
        assert column == "file only"
        return
    named = re.findall(r"`([A-Z_]+)`", column)
    assert named[0] == env_name(setting)
    assert named[1:] == list(OTEL_ENV.get(setting, ()))


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "bash .ci/run" in README
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def _layout_names() -> set[str]:
    """The names in README's layout under gateway/: `stream/` a package, `config` a module."""
    block = README.split("## Layout\n", 1)[1].split("```", 2)[1]
    names: set[str] = set()
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            first_column = re.split(r"\s{2,}", line.strip())[0]
            names |= set(re.findall(r"[\w]+/?", first_column))
    return names


def test_readme_layout_names_every_package_and_module() -> None:
    gateway = ROOT / "gateway"
    tree = {f"{p.name}/" for p in gateway.iterdir() if (p / "__init__.py").exists()}
    tree |= {p.stem for p in gateway.glob("*.py") if p.stem != "__init__"}
    named = _layout_names()
    assert sorted(tree - named) == [], "in gateway/, missing from README's layout"
    assert sorted(named - tree) == [], "in README's layout, missing from gateway/"
