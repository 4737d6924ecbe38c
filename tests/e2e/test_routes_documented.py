"""Every route the gateway serves is named in README or a docs page (tests/test_docs.py
checks the settings, the links and the layout)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.config import Settings

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = "\n".join(
    path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
)


def _documented_path(path: str) -> str:
    """A route as the docs spell it: `/v1/{tail}` is `/v1/*`, `{trace_id}` is `{id}`."""
    return path.replace("{tail}", "*").replace("{trace_id}", "{id}")


def _routes() -> list[str]:
    app = create_app(Settings())
    paths = {
        r.canonical + "/" if isinstance(r, web.StaticResource) else r.canonical
        for r in app.router.resources()
    }
    return sorted(_documented_path(path) for path in paths)


def _named(route: str) -> bool:
    """In a code span: `/sessions`, `GET /api/traces?limit=…`, `/traces/{id}`."""
    return re.search(r"[` ]" + re.escape(route) + r"[`?]", EVERYTHING) is not None


@pytest.mark.parametrize("route", _routes())
def test_every_route_is_documented(route: str) -> None:
    assert _named(route), f"{route} is in no page of README.md or docs/"


def test_a_route_named_nowhere_is_found_missing() -> None:
    assert not _named("/api/nowhere")
    assert not _named("/traces")  # only inside `/traces/{id}`
