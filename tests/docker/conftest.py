"""Registers the `slow` marker for the image test (deselect with -m "not slow")."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: installs packages into a fresh virtualenv")
