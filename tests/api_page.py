"""docs/api-reference.md, generated from the read API's OpenAPI document
(`gateway.ui.openapi.routes.openapi_document`): each route with its parameters, body, answer
and statuses, then every model an answer or body nests, each once. `tests/test_api_page.py`
checks that the committed page is this module's output. Regenerate with:

    python -m tests.api_page > docs/api-reference.md
"""

from __future__ import annotations

from typing import Any

from gateway.ui.openapi.routes import openapi_document

REF = "#/components/schemas/"

INTRO = """\
# Read API reference

Every route of the read API: its parameters, its request body, the fields of its answer and
the statuses it answers with. What the routes are for, with examples, is in
[api.md](api.md). This page is generated from the OpenAPI document the gateway serves at
`/api/openapi.json` (`python -m tests.api_page > docs/api-reference.md`).

Where `admin_token` is set (it must be when the gateway listens beyond loopback), every route
needs it, as `Authorization: Bearer <token>` or the login page's cookie, and answers 401
without it. Errors come as [`ErrorBody`](#errorbody): `{"error": {message, type, code,
param}}`. A type `X or null` is null when there is no value.
"""


def page() -> str:
    document = openapi_document(secured=True)
    schemas: dict[str, Any] = document["components"]["schemas"]
    parts = [INTRO]
    nested: set[str] = {"ErrorBody"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            parts.append(_route(method.upper(), path, operation, schemas, nested))
    parts.append("## Models\n\nThe objects the answers and bodies above nest, by name.\n")
    done: set[str] = set()
    while pending := sorted(nested - done):  # a model's own fields may nest more
        for name in pending:
            done.add(name)
            nested |= _refs(schemas[name])
    parts += [_model(name, schemas[name]) for name in sorted(done)]
    return "\n".join(parts)


def _route(
    method: str, path: str, operation: dict[str, Any], schemas: dict[str, Any], nested: set[str]
) -> str:
    lines = [f"## {method} {path}", "", _text(operation["summary"]), ""]
    params = operation["parameters"]
    if params:
        lines += ["| parameter | in | type | limits | description |", "|---|---|---|---|---|"]
        lines += [
            f"| `{p['name']}` | {p['in']} | {_type(p['schema'])} | {_limits(p['schema'])} "
            f"| {_text(p.get('description', ''))} |"
            for p in params
        ]
        lines.append("")
    if "requestBody" in operation:
        name = _ref_name(operation["requestBody"]["content"]["application/json"]["schema"])
        nested |= _refs(schemas[name])
        lines += [f"Request body (JSON), `{name}`:", "", _fields(schemas[name], body=True), ""]
    rows = ["| status | answer |", "|---|---|"]
    answers: set[str] = set()
    for status, answer in operation["responses"].items():
        [(media, content)] = answer["content"].items()
        name = _ref_name(content.get("x-itemSchema", content["schema"]))
        if status.startswith("2"):
            answers.add(name)
            each = ", one a line" if "x-itemSchema" in content else ""
            rows.append(f"| {status} | `{name}` (`{media}`{each}) |")
        else:
            said = _text(answer["description"])
            rows.append(f"| {status} | {_type({'$ref': REF + name})}: {said} |")
    [name] = answers  # every success status answers with the route's one model
    nested |= _refs(schemas[name])
    lines += [f"Answer: `{name}`", "", _model_body(schemas[name]), "", *rows]
    return "\n".join(lines) + "\n"


def _model(name: str, schema: dict[str, Any]) -> str:
    return f"### {name}\n\n{_model_body(schema)}\n"


def _model_body(schema: dict[str, Any]) -> str:
    """A model's description then its fields' table, or what it is when it has no fields."""
    lines = [_text(schema["description"]), ""] if "description" in schema else []
    if "properties" in schema:
        return "\n".join([*lines, _fields(schema)])
    return "\n".join([*lines, f"A value of type {_type(schema)}."])


def _fields(schema: dict[str, Any], *, body: bool = False) -> str:
    """A model's fields, each named with its model (`Budget.max_steps`): docs/settings.md
    alone has rows that start with a setting's bare name."""
    required = set(schema.get("required", ()))
    model = schema["title"]
    if body:
        rows = ["| field | type | required | limits | description |", "|---|---|---|---|---|"]
        rows += [
            f"| `{model}.{name}` | {_type(field)} | {'yes' if name in required else 'no'} "
            f"| {_limits(field)} | {_text(field.get('description', ''))} |"
            for name, field in schema["properties"].items()
        ]
    else:
        rows = ["| field | type | description |", "|---|---|---|"]
        rows += [
            f"| `{model}.{name}` | {_type(field)} | {_text(field.get('description', ''))} |"
            for name, field in schema["properties"].items()
        ]
    return "\n".join(rows)


def _type(schema: dict[str, Any]) -> str:
    """A schema's type in words: refs link to their model's table."""
    if "$ref" in schema:
        name = _ref_name(schema)
        return f"[`{name}`](#{name.lower()})"
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        said = " or ".join(_type(option) for option in options)
        return said + (" or null" if len(options) < len(schema["anyOf"]) else "")
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    return f"{kind} ({schema['format']})" if "format" in schema else str(kind)


LIMITS = {
    "minimum": "at least {}",
    "maximum": "at most {}",
    "exclusiveMinimum": "more than {}",
    "exclusiveMaximum": "less than {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
}


def _limits(schema: dict[str, Any]) -> str:
    said = [form.format(schema[key]) for key, form in LIMITS.items() if key in schema]
    if schema.get("default") is not None:
        said.append(f"default `{schema['default']}`")
    return "; ".join(said) or "—"


def _refs(schema: Any) -> set[str]:
    """The models a schema names anywhere inside it."""
    if isinstance(schema, dict):
        found = {_ref_name(schema)} if "$ref" in schema else set()
        for value in schema.values():
            found |= _refs(value)
        return found
    if isinstance(schema, list):
        return set().union(*map(_refs, schema)) if schema else set()
    return set()


def _ref_name(schema: dict[str, Any]) -> str:
    return str(schema["$ref"]).removeprefix(REF)


def _text(text: str) -> str:
    """A description fit for one table cell."""
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":
    print(page(), end="")
