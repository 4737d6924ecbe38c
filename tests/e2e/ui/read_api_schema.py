"""Checking read API answers against the gateway's own OpenAPI document."""

from __future__ import annotations

from typing import Any

import jsonschema

ADMIN_TOKEN = "read-api-admin-token-0123"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def answer_schema(document: dict[str, Any], path: str, status: int) -> dict[str, Any]:
    """The schema of a GET's answer with `status`: the body's, or a JSON Lines body's line's."""
    response = document["paths"][path]["get"]["responses"][str(status)]
    ((_media, content),) = response["content"].items()
    schema = content.get("x-itemSchema", content["schema"])
    return {**schema, "components": document["components"]}


def validate(document: dict[str, Any], path: str, status: int, body: Any) -> None:
    jsonschema.Draft202012Validator(answer_schema(document, path, status)).validate(body)
