"""README and docs/ document every setting once (docs/settings.md, generated from the
declaration), its environment twin, the test command CI runs and the layout;
README links every docs page and every relative link between pages resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import FILE_ONLY, Settings
from gateway.config_load import ENV_SETTINGS, OTEL_ENV, env_name
from tests import settings_page

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
SETTINGS_PAGE = (DOCS / "settings.md").read_text()
PAGES = {path: path.read_text() for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]}
EVERYTHING = "\n".join(PAGES.values())


def test_settings_page_is_generated_from_the_declaration() -> None:
    assert settings_page.page() == SETTINGS_PAGE, (
        "docs/settings.md is stale: python -m tests.settings_page > docs/settings.md"
    )


@pytest.mark.parametrize("setting", sorted(Settings.model_fields))
def test_every_setting_is_documented_once_in_the_settings_page(setting: str) -> None:
    row = f"| `{setting}` |"
    assert SETTINGS_PAGE.count(row) == 1, f"docs/settings.md's table lacks {setting}"
    assert EVERYTHING.count(row) == 1, f"{setting} has a table row outside docs/settings.md"


@pytest.mark.parametrize("setting", ENV_SETTINGS)
def test_every_environment_variable_is_documented_in_one_row(setting: str) -> None:
    rows = [line for line in EVERYTHING.splitlines() if line.startswith("| `")]
    assert len([row for row in rows if f"`{env_name(setting)}`" in row]) == 1


def _environment_column() -> dict[str, str]:
    """The settings table: each setting's environment column."""
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", SETTINGS_PAGE, flags=re.MULTILINE)
    return {name: column.strip() for name, column in rows if name in Settings.model_fields}


@pytest.mark.parametrize("setting", sorted(Settings.model_fields))
def test_every_setting_has_its_environment_name_or_is_declared_file_only(setting: str) -> None:
    """The environment names are derived from the declaration: a setting cannot be added
    without one unless it is marked FILE_ONLY, and the table's column says which."""
    file_only = FILE_ONLY in Settings.model_fields[setting].metadata
    assert (setting in ENV_SETTINGS) is not file_only
    column = _environment_column()[setting]
    if file_only:
        assert column == "file only"
        return
    named = re.findall(r"`([A-Z_]+)`", column)
    assert named[0] == env_name(setting)
    assert named[1:] == list(OTEL_ENV.get(setting, ()))


def test_settings_page_refuses_a_setting_without_a_meaning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    meanings = dict(settings_page.MEANINGS)
    del meanings["port"]
    monkeypatch.setattr(settings_page, "MEANINGS", meanings)
    with pytest.raises(ValueError, match="lacks \\['port'\\]"):
        settings_page.page()


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "bash .ci/run" in README
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_readme_links_every_docs_page() -> None:
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", README))
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(linked)


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    without_code = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", without_code, flags=re.MULTILINE)}


def _relative_links() -> list[tuple[str, str]]:
    links = []
    for path, text in PAGES.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"^[a-z]+:", target):
                links.append((str(path.relative_to(ROOT)), target))
    return links


def _broken(page: str, target: str) -> str | None:
    """Why a relative link of `page` (a path from the repository root) does not resolve."""
    file, _, anchor = target.partition("#")
    resolved = (ROOT / page).parent / file if file else ROOT / page
    if not resolved.exists():
        return f"{page} links {target}: no such file"
    if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text()):
        return f"{page} links {target}: no such heading"
    return None


@pytest.mark.parametrize(("page", "target"), _relative_links())
def test_relative_links_resolve(page: str, target: str) -> None:
    assert _broken(page, target) is None


def test_a_broken_link_is_found() -> None:
    assert _broken("README.md", "docs/nowhere.md") == (
        "README.md links docs/nowhere.md: no such file"
    )
    assert _broken("docs/api.md", "traces.md#no-such-part") == (
        "docs/api.md links traces.md#no-such-part: no such heading"
    )
    assert _broken("docs/api.md", "traces.md#sub-agents") is None
    assert _broken("docs/api.md", "#cassettes") is None


def test_readme_fits_a_few_screens() -> None:
    assert len(README.splitlines()) <= 150, "README grew: move the detail to a page of docs/"


def test_anchor_follows_github() -> None:
    assert _anchor("Several workers, one SQLite file, several replicas") == (
        "several-workers-one-sqlite-file-several-replicas"
    )
    assert _anchor("Cost, time and how a run ended") == "cost-time-and-how-a-run-ended"


def _layout_names() -> set[str]:
    """The names in docs/layout.md under gateway/: `stream/` a package, `config` a module."""
    layout = (DOCS / "layout.md").read_text()
    block = layout.split("## Layout\n", 1)[1].split("```", 2)[1]
    names: set[str] = set()
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            first_column = re.split(r"\s{2,}", line.strip())[0]
            names |= set(re.findall(r"[\w]+/?", first_column))
    return names


def test_layout_names_every_package_and_module() -> None:
    gateway = ROOT / "gateway"
    tree = {f"{p.name}/" for p in gateway.iterdir() if (p / "__init__.py").exists()}
    tree |= {p.stem for p in gateway.glob("*.py") if p.stem != "__init__"}
    named = _layout_names()
    assert sorted(tree - named) == [], "in gateway/, missing from docs/layout.md"
    assert sorted(named - tree) == [], "in docs/layout.md, missing from gateway/"
