"""Builds the OpenAPI 3.1 document from the route table: paths from its entries, schemas
from their pydantic models, security from the admin-token rules (gateway.ui.auth)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from gateway.ui.api_models.common import ErrorBody
from gateway.ui.auth import COOKIE
from gateway.ui.openapi.route import JSON, ApiRoute

REF = "#/components/schemas/{model}"
# OpenAPI's field of an operation's answers; it names no wire protocol.
RESPONSES = "responses"
ERRORS = {
    400: "A query value it cannot use.",
    401: "The admin token is missing or wrong.",
    404: "No such trace.",
    409: "The step cannot be sent again as asked; the message says why.",
    503: "A search ran past its time limit; retry later or narrow it.",
}
SECURITY_SCHEMES = {
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "The gateway's admin token (`admin_token`).",
    },
    "adminSession": {
        "type": "apiKey",
        "in": "cookie",
        "name": COOKIE,
        "description": "The session cookie the login page sets after the admin token.",
    },
}
INFO = (
    "The read side of Loopwatch: traces (agent runs) with their steps, violations, sessions "
    "and the MCP proxy's servers and executions. Where `admin_token` is set (it must be when "
    "the gateway listens beyond loopback) every route needs it, as a bearer token or the "
    "login cookie; errors come in OpenAI's error shape."
)


def openapi(routes: Sequence[ApiRoute], *, version: str, secured: bool) -> dict[str, Any]:
    """The document; `secured`: the gateway has an admin token, so every route needs it."""
    schemas = _schemas(routes)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Loopwatch read API", "version": version, "description": INFO},
        "paths": _paths(routes, schemas, secured),
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
    }
    if secured:
        document["security"] = [{name: []} for name in SECURITY_SCHEMES]
    for route in routes:  # query models describe parameters; no answer is one
        if route.query is not None:
            schemas.pop(route.query.__name__, None)
    return document


def _schemas(routes: Sequence[ApiRoute]) -> dict[str, Any]:
    models: set[type[BaseModel]] = {ErrorBody}
    for route in routes:
        models.add(route.response)
        models |= {model for model in (route.query, route.body) if model is not None}
    ordered = sorted(models, key=lambda model: model.__name__)
    _, found = models_json_schema([(model, "serialization") for model in ordered], ref_template=REF)
    return dict(sorted(found.get("$defs", {}).items()))


def _paths(routes: Sequence[ApiRoute], schemas: dict[str, Any], secured: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for route in routes:
        operation: dict[str, Any] = {
            "operationId": route.operation_id,
            "summary": route.summary,
            "parameters": _parameters(route, schemas),
        }
        if route.body is not None:
            body = {"schema": {"$ref": REF.format(model=route.body.__name__)}}
            operation["requestBody"] = {"required": True, "content": {JSON: body}}
        operation[RESPONSES] = _responses(route, secured)
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return paths


def _parameters(route: ApiRoute, schemas: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.path_params
    ]
    if route.query is None:
        return found
    for name, schema in schemas[route.query.__name__]["properties"].items():
        described = dict(schema)
        parameter = {"name": name, "in": "query", "required": False}
        if "description" in described:
            parameter["description"] = described.pop("description")
        found.append(parameter | {"schema": _not_null(described)})
    return found


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query value is absent or a value, never null: `X | None` is described as X."""
    options = [s for s in schema.get("anyOf", ()) if s.get("type") != "null"]
    if len(options) != 1:
        return schema
    rest = {key: value for key, value in schema.items() if key not in ("anyOf", "default")}
    kept: dict[str, Any] = options[0] | rest
    return kept


def _responses(route: ApiRoute, secured: bool) -> dict[str, Any]:
    answer = {"schema": {"$ref": REF.format(model=route.response.__name__)}}
    if route.media_type != JSON:  # JSON Lines: the schema is each line's
        answer = {"schema": {"type": "string"}, "x-itemSchema": answer["schema"]}
    responses: dict[str, Any] = {
        str(status): {"description": route.summary, "content": {route.media_type: answer}}
        for status in route.success
    }
    error = {JSON: {"schema": {"$ref": REF.format(model=ErrorBody.__name__)}}}
    for status in sorted({*route.errors, *((401,) if secured else ())}):
        responses[str(status)] = {"description": ERRORS[status], "content": error}
    return responses
