"""The read API's OpenAPI document is valid OpenAPI 3.1, and its models hold the JSON to it:
no key they do not name, optional keys left out as the reading left them."""

from __future__ import annotations

import json

import pytest
from openapi_spec_validator import validate
from pydantic import ValidationError

from gateway.ui.answer import dumped
from gateway.ui.api_models.violations import ViolationList
from gateway.ui.openapi.routes import ROUTES, openapi_document

VIOLATION = {
    "id": "v1",
    "kind": "duplicate_call_id",
    "trace_id": "tr-1",
    "step_id": "st-1",
    "call_id": "c",
    "detail": "twice",
    "enforced": False,
    "created_at": "2026-01-01T00:00:00.000000Z",
}


@pytest.mark.parametrize("secured", [False, True])
def test_the_document_is_valid_openapi_3_1(secured: bool) -> None:
    document = openapi_document(secured=secured)
    validate(document)  # raises on any departure from the 3.1 specification
    assert document["openapi"] == "3.1.0"
    assert ("security" in document) is secured
    listed = document["paths"]["/api/traces"]["get"]["parameters"]
    by_name = {parameter["name"]: parameter for parameter in listed}
    limit = by_name["limit"]["schema"]
    assert (limit["minimum"], limit["maximum"], limit["type"]) == (1, 200, "integer")
    assert by_name["since"]["schema"]["format"] == "date-time"
    assert all(parameter["description"] for parameter in listed)


def test_every_route_answers_a_documented_model_and_its_errors() -> None:
    document = openapi_document(secured=True)
    schemas = document["components"]["schemas"]
    for route in ROUTES:
        responses = document["paths"][route.path][route.method.lower()]["responses"]
        assert route.response.__name__ in schemas
        assert "401" in responses  # a token is set: every route needs it
        for status in route.errors:
            assert str(status) in responses, (route.path, status)


def test_a_reading_is_written_as_it_was_read() -> None:
    page = {"violations": [VIOLATION, {**VIOLATION, "id": "v2", "items": []}], "next_cursor": None}
    assert json.loads(dumped(ViolationList, page)) == page  # `items` only where it was


def test_a_key_no_model_names_is_an_error() -> None:
    page = {"violations": [{**VIOLATION, "surprise": 1}], "next_cursor": None}
    with pytest.raises(ValidationError):
        dumped(ViolationList, page)


def test_the_fork_route_documents_its_body_and_its_answers() -> None:
    document = openapi_document(secured=True)
    validate(document)
    operation = document["paths"]["/api/traces/{trace_id}/fork"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ForkRequest"
    }
    assert {"ForkRequest", "ForkAnswer"} <= set(document["components"]["schemas"])
    assert set(operation["responses"]) == {"200", "201", "202", "400", "401", "404", "409"}
