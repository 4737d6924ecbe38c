"""A big package is a tree too (STYLE rule 26): no package of gateway/ past 15 modules, and no
name prefix standing for a folder; every package ships in the wheel.

A prefix stands for a folder when three modules of one package share their first word
(`ledger_file`, `ledger_memory`, `ledger_pg`), or when a module's first word names a sibling
package (`ledger_file.py` beside `ledger/`). Migration revisions are a history, not modules.
"""

from __future__ import annotations

import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = ROOT / "gateway"
MAX_MODULES = 15
PREFIX_GROUP = 3
HISTORY = {GATEWAY / "store" / "migrations" / "versions"}
# A protocol's adapter and its helpers are named by the wire protocol (`openai_chat`,
# `openai_responses_events`), the unit the import contracts keep independent.
NAMED_BY_PROTOCOL = {(GATEWAY / "protocols", "openai")}


def _packages(root: Path) -> list[Path]:
    return sorted(init.parent for init in root.rglob("__init__.py"))


def _modules(package: Path) -> list[str]:
    return sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")


def _name(package: Path, root: Path) -> str:
    return str(package.relative_to(root.parent))


def too_many_modules(root: Path) -> list[str]:
    return [
        f"{_name(package, root)}: {len(_modules(package))} modules"
        for package in _packages(root)
        if package not in HISTORY and len(_modules(package)) > MAX_MODULES
    ]


def prefixes_for_folders(root: Path) -> list[str]:
    found = []
    for package in _packages(root):
        by_word: dict[str, list[str]] = defaultdict(list)
        for module in _modules(package):
            by_word[module.split("_")[0]].append(module)
        folders = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
        for word, modules in sorted(by_word.items()):
            prefixed = [m for m in modules if m != word]
            grouped = len(modules) >= PREFIX_GROUP and (package, word) not in NAMED_BY_PROTOCOL
            beside = prefixed and ({word, word + "s"} & folders)
            if grouped or beside:
                found.append(f"{_name(package, root)}: {', '.join(modules)}")
    return found


def test_no_package_is_past_fifteen_modules() -> None:
    assert too_many_modules(GATEWAY) == [], "group them in sub-packages by responsibility"


def test_no_name_prefix_stands_for_a_folder() -> None:
    assert prefixes_for_folders(GATEWAY) == [], "a sub-package instead of a name prefix"


def test_the_checks_see_a_flat_package(tmp_path: Path) -> None:
    root = tmp_path / "gateway"
    flat = root / "store"
    (flat / "ledger").mkdir(parents=True)
    for module in ("__init__", *(f"m{i}" for i in range(14)), "ledger_pg", "ledger_file"):
        (flat / f"{module}.py").write_text("")
    (flat / "ledger" / "__init__.py").write_text("")
    (flat / "key_walks.py").write_text("")
    (flat / "key_epochs.py").write_text("")
    assert too_many_modules(root) == ["gateway/store: 18 modules"]
    assert prefixes_for_folders(root) == ["gateway/store: ledger_file, ledger_pg"]
    (flat / "key_tables.py").write_text("")
    assert prefixes_for_folders(root)[0] == "gateway/store: key_epochs, key_tables, key_walks"


def test_every_package_ships_in_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"]) - set(setuptools["package-dir"])
    tree = {".".join(p.relative_to(ROOT).parts) for p in _packages(GATEWAY)}
    assert sorted(tree ^ listed) == [], "pyproject's [tool.setuptools] packages"
