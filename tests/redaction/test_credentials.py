"""Credentials in parameters and tool declarations, found by the names of their keys."""

from __future__ import annotations

import pytest

from gateway.config import RedactionSettings
from gateway.redaction.credentials import credential_kind
from gateway.redaction.redactor import Redactor
from tests.factories import bare_step

REDACTOR = Redactor(RedactionSettings())


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("authorization_token", "token"),
        ("x-api-key", "api_key"),
        ("X-Goog-Api-Key", "api_key"),
        ("apiKey", "api_key"),
        ("APIKEY", "apikey"),
        ("clientSecret", "secret"),
        ("OAuthToken", "token"),
        ("aws_secret_access_key", "key"),
        ("dbPassword", "password"),
        ("Set-Cookie", "cookie"),
        ("credentials", "credentials"),
        # Counts, limits, cache keys and ids are not credentials.
        ("max_tokens", None),
        ("max_output_tokens", None),
        ("budget_tokens", None),
        ("input_tokens", None),
        ("top_k", None),
        ("prompt_cache_key", None),
        ("cache_key", None),
        ("key", None),
        ("aws_access_key_id", None),
        ("token_count", None),
    ],
)
def test_a_credential_is_known_by_its_name(key: str, kind: str | None) -> None:
    assert credential_kind(key) == kind


def test_parameters_keep_counts_schemas_and_hide_credentials_at_any_depth() -> None:
    params = {
        "max_tokens": 512,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "prompt_cache_key": "run-17",
        "new_feature": [{"deep": {"bearerToken": "opaque-value-1", "retries": 3}}],
        "plugin": {"signing_key": {"kid": "k1", "pem": "opaque-value-2"}, "api_key_id": "id-9"},
        "extra_headers": {"X-Tenant": "opaque-value-3"},
        "session_token": True,  # a flag says nothing secret
        "note": "mail ops@example.com",
    }
    tools = [
        {
            "name": "login",
            "input_schema": {
                "type": "object",
                "properties": {
                    "password": {"type": "string", "description": "the user's password"},
                    "headers": {"type": "object"},
                },
                "required": ["password"],
            },
        }
    ]
    step = REDACTOR.redact_step(bare_step(params=params, declared_tools=tools))
    assert step.params == {
        "max_tokens": 512,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "prompt_cache_key": "run-17",
        "new_feature": [{"deep": {"bearerToken": "[REDACTED:token]", "retries": 3}}],
        "plugin": {
            "signing_key": {"kid": "[REDACTED:key]", "pem": "[REDACTED:key]"},
            "api_key_id": "id-9",
        },
        "extra_headers": {"X-Tenant": "[REDACTED:header]"},
        "session_token": True,
        "note": "mail [REDACTED:email]",
    }
    assert step.declared_tools == tuple(tools)  # a schema naming a secret argument holds none


def test_a_credential_nested_too_deep_to_walk_is_still_hidden() -> None:
    deep: object = {"authorization_token": "opaque-value-4", "max_tokens": 9}
    for _ in range(700):  # deeper than the walk, as deep as a body the gateway reads
        deep = {"next": deep}
    step = REDACTOR.redact_step(bare_step(params={"mcp": deep}))
    assert "opaque-value-4" not in str(step.params)
    assert "[REDACTED:token]" in str(step.params)
    assert '"max_tokens":9' in str(step.params)
