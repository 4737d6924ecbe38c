"""docs/api-reference.md is the read API's OpenAPI document rendered (tests/api_page.py):
committed as generated, naming every route, parameter and answer model."""

from __future__ import annotations

from pathlib import Path

from gateway.ui.openapi.routes import ROUTES, openapi_document
from tests import api_page

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "api-reference.md").read_text()


def test_reference_page_is_generated_from_the_openapi_document() -> None:
    assert api_page.page() == PAGE, (
        "docs/api-reference.md is stale: python -m tests.api_page > docs/api-reference.md"
    )


def test_every_route_parameter_and_model_has_its_place() -> None:
    document = openapi_document(secured=True)
    for route in ROUTES:
        assert f"\n## {route.method} {route.path}\n" in PAGE
        assert f"Answer: `{route.response.__name__}`" in PAGE
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation["parameters"]:
                assert f"| `{parameter['name']}` | {parameter['in']} |" in PAGE
    nested = PAGE.split("\n## Models\n", 1)[1]
    headings = [line for line in nested.splitlines() if line.startswith("### ")]
    assert headings == sorted(set(headings)), "each nested model once, by name"
    assert "### ErrorBody" in headings and "### Step" in headings


def test_a_body_s_required_field_and_a_query_s_limits_are_said() -> None:
    assert "| `ForkRequest.at_step` | integer | yes |" in PAGE
    assert "| `limit` | query | integer | at least 1; at most 200; default `50` |" in PAGE
    assert "| `trace_id` | query | string |" in PAGE  # GET /api/violations?trace_id=
