"""Redaction rules, JSON keys, truncation, items and steps, on realistic agent text."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gateway.config import RedactionPattern, RedactionSettings
from gateway.items import Item, ItemKind, Violation, ViolationKind
from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.redaction.redactor import Redactor, without_opaque
from tests.factories import assistant_text, bare_step, user_text

REDACTOR = Redactor(RedactionSettings())

OPENAI_KEY = "sk-proj-Xa81bQ_fN3k2LmZp9Rt4uVw7yC6dE5gH1iJ0"
ANTHROPIC_KEY = "sk-ant-api03-q8Zr4Tn2Lm9Kp1Xv6Bw3Yc5Hd7Fs0Gj-AbCdEfGhIj_kL"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"export OPENAI_API_KEY={OPENAI_KEY}", "export OPENAI_API_KEY=[REDACTED:api_key]"),
        ("legacy sk-9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee", "legacy [REDACTED:api_key]"),
        (f"key: {ANTHROPIC_KEY}.", "key: [REDACTED:api_key]."),
        # Keys glued to a name with a hyphen are still keys.
        ("task-sk-9f8e7d6c5b4a39281706f5e4d3c2", "task-[REDACTED:api_key]"),
        (
            "AWS AKIAIOSFODNN7EXAMPLE and ASIAY34FZKBOKMUTVV7A",
            "AWS [REDACTED:aws_key] and [REDACTED:aws_key]",
        ),
        ("gh auth ghp_16C7e42F292c6912E7710c838347Ae178B4a", "gh auth [REDACTED:github_token]"),
        ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "[REDACTED:github_token]"),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS",
            "[REDACTED:github_token]",
        ),
        (f"cookie={JWT}; path=/", "cookie=[REDACTED:jwt]; path=/"),
        ("Authorization: Bearer abc123def456ghi789", "Authorization: Bearer [REDACTED:bearer]"),
        (
            "authorization: bearer Zm9vYmFyYmF6cXV4cXV1eA==",
            "authorization: Bearer [REDACTED:bearer]",
        ),
        # The specific token kind wins over the generic Bearer form.
        (f"Bearer {JWT}", "Bearer [REDACTED:jwt]"),
        ("write to jane.doe+billing@example.co.uk.", "write to [REDACTED:email]."),
        ("José <josé.núñez@correo.es>", "José <[REDACTED:email]>"),
        ("call +1 (415) 555-2671 now", "call [REDACTED:phone] now"),
        ("+44 20 7946 0958", "[REDACTED:phone]"),
        ("+4930123456789", "[REDACTED:phone]"),
        (
            "US 415-555-2671, 415.555.2671, (415) 555-2671",
            "US [REDACTED:phone], [REDACTED:phone], [REDACTED:phone]",
        ),
        ("toll free 1-800-555-0199", "toll free [REDACTED:phone]"),
        (
            "Berlin 030 1234 5678, Paris 06 12 34 56 78",
            "Berlin [REDACTED:phone], Paris [REDACTED:phone]",
        ),
        ("Visa 4111 1111 1111 1111 exp 12/27", "Visa [REDACTED:card] exp 12/27"),
        (
            "mc 5555-5555-5555-4444; amex 378282246310005",
            "mc [REDACTED:card]; amex [REDACTED:card]",
        ),
        ("4242424242424242", "[REDACTED:card]"),
    ],
)
def test_each_kind_is_redacted(text: str, expected: str) -> None:
    assert REDACTOR.redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "model gpt-4o-2024-08-06 and claude-3-5-sonnet-20241022",
        "released 2024-08-06, on 01/02/2024 and 01-02-2024 at 12:30:45, in 1999",
        "versions 1.2.3, 10.0.19045.3803 and python3.11.9",
        "usage: prompt_tokens=123456, completion_tokens=7890, total 131346",
        "latency 3.14159265358979 s, price 0.0000025 per token",
        "epoch 1717171717 and 1717171717171 ms",
        "uuid 550e8400-e29b-41d4-a716-446655440000",
        "call_M26z19sncd7b4LBgzKRRbaUE and toolu_01A09q90qw90lq917835lq9",
        "chatcmpl-9tDxq3Ps8ZkqJ0aF and resp_67ccd2bed1ec8190b14f964abc054267",
        "ids 1234567890123452 and 1000000000000008",  # Luhn passes, but no issuer starts with 1
        "card 4111 1111 1111 1112 fails the Luhn check",
        "order 4111111111111112",
        "the bearer of this letter, a bearer token",
        "risk-assessment: the disk-sk-free-space check, tasksk-abcdefghijklmnopqrstuvwx",
        "pip install pkg@1.2.3 and @decorator usage",
        "IP 192.168.100.254 and port 8787, 10 + 20 = 30",
        "sequence 100 200 3000 and 12345 67890, 155-555-2671",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert REDACTOR.redact_text(text) == text


def test_configured_patterns_run_with_their_own_kind() -> None:
    settings = RedactionSettings(
        patterns=(
            RedactionPattern(name="customer_id", regex=r"CUST-\d{6}"),
            RedactionPattern(name="maybe_empty", regex=r"z*"),
        )
    )
    redactor = Redactor(settings)
    text = "customer CUST-004217 wrote from ops@example.com"
    assert redactor.redact_text(text) == (
        "customer [REDACTED:customer_id] wrote from [REDACTED:email]"
    )


def test_json_keys_at_any_depth_in_normalized_spellings() -> None:
    arguments = json.dumps(
        {
            "url": "https://api.example.com/v1/orders",
            "headers": {"X-Api-Key": "k-123", "Authorization": "Basic dXNlcjpwYXNz"},
            "auth": [{"apiKey": 42, "Password": "hunter2", "refresh-token": None}],
            "note": "ping jane@example.com — merci",
            "max_tokens": 256,
            "prompt_tokens": 12,
        }
    )
    redacted = json.loads(REDACTOR.redact_json_text(arguments))
    assert redacted == {
        "url": "https://api.example.com/v1/orders",
        "headers": {"X-Api-Key": "[REDACTED:api_key]", "Authorization": "[REDACTED:authorization]"},
        "auth": [
            {
                "apiKey": "[REDACTED:api_key]",
                "Password": "[REDACTED:password]",
                "refresh-token": None,
            }
        ],
        "note": "ping [REDACTED:email] — merci",
        "max_tokens": 256,
        "prompt_tokens": 12,
    }


def test_json_is_compact_keeps_order_and_non_ascii() -> None:
    text = '{ "z": 1, "a": "ünïcødé 東京", "m": [1, 2.5, true, null] }'
    assert REDACTOR.redact_json_text(text) == '{"z":1,"a":"ünïcødé 東京","m":[1,2.5,true,null]}'


def test_invalid_json_falls_back_to_text_rules_and_key_pairs() -> None:
    cut_off = '{"password": "hunter2", "to": "bob@example.com", "body": "Dear Bo'
    assert REDACTOR.redact_json_text(cut_off) == (
        '{"password": "[REDACTED:password]", "to": "[REDACTED:email]", "body": "Dear Bo'
    )
    assert REDACTOR.redact_json_text(f"not json {OPENAI_KEY}") == "not json [REDACTED:api_key]"


def test_tool_result_json_and_tool_call_arguments() -> None:
    call = Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id="call_M26z19sncd7b4LBgzKRRbaUE",
        tool_name="http_get",
        arguments='{"url": "https://x.test", "headers": {"authorization": "Bearer abc123def456"}}',
    )
    result = Item(
        ItemKind.TOOL_RESULT,
        role="tool",
        call_id="call_M26z19sncd7b4LBgzKRRbaUE",
        text='{"user": {"email": "amy@example.org", "session": {"access_token": "t0k3n"}}}',
    )
    redacted_call, redacted_result = REDACTOR.redact_items([call, result])
    assert redacted_call.call_id == call.call_id
    assert redacted_call.arguments == (
        '{"url":"https://x.test","headers":{"authorization":"[REDACTED:authorization]"}}'
    )
    assert redacted_result.text == (
        '{"user":{"email":"[REDACTED:email]","session":{"access_token":"[REDACTED:access_token]"}}}'
    )


def test_free_form_tool_input_is_redacted_as_text_and_keeps_its_spacing() -> None:
    call = Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id="call_1",
        tool_name="exec",
        arguments='{"note": 1}  # mail a@b.example',
        attrs={"free_form": True},
    )
    assert REDACTOR.redact_item(call).arguments == '{"note": 1}  # mail [REDACTED:email]'
    looks_like_json = call.with_changes(arguments='{"a":  1, "to": "a@b.example"}')
    assert REDACTOR.redact_item(looks_like_json).arguments == '{"a":  1, "to": "[REDACTED:email]"}'


def test_user_text_that_looks_like_json_is_text() -> None:
    item = Item(ItemKind.USER, role="user", text='{"password": "hunter2"}  mail a@b.example')
    assert REDACTOR.redact_item(item).text == '{"password": "hunter2"}  mail [REDACTED:email]'


def test_attrs_strings_are_redacted_and_other_values_kept() -> None:
    item = Item(
        ItemKind.REASONING,
        attrs={"tokens": 512, "summary_by": "ops@example.com", "nested": ["+44 20 7946 0958"]},
    )
    assert REDACTOR.redact_item(item).attrs == {
        "tokens": 512,
        "summary_by": "[REDACTED:email]",
        "nested": ["[REDACTED:phone]"],
    }
    assert item.attrs["summary_by"] == "ops@example.com"  # the input item is not mutated


# Ciphertext in base64 that text rules would match: an API key after a "/", a card number.
CIPHERTEXT = "EqQBCkgIBRAB/sk-ant-api03xQ9v2Lm8Kp4Rz7Tn1Wb6/4111111111111111/Yc3Hd5Jf0Gs="


def test_opaque_payloads_are_left_byte_for_byte() -> None:
    assert REDACTOR.redact_text(CIPHERTEXT) != CIPHERTEXT  # what a rule would do to it
    kept = {"signature": CIPHERTEXT}
    item = Item(ItemKind.REASONING, attrs={OPAQUE: kept, "by": "ops@example.com"})
    assert REDACTOR.redact_item(item).attrs == {OPAQUE: kept, "by": "[REDACTED:email]"}


def test_exporters_get_steps_without_opaque_payloads() -> None:
    kept = Item(ItemKind.REASONING, attrs={OPAQUE: {"signature": CIPHERTEXT}, "chars": 3})
    step = replace(bare_step(), input_items=(user_text("hi"), kept), output_items=(kept,))
    exported = without_opaque(step)
    assert [i.attrs for i in exported.output_items] == [{"chars": 3}]
    assert exported.input_items[0] is step.input_items[0]
    assert CIPHERTEXT not in repr(exported)
    plain = replace(step, input_items=(), output_items=())
    assert without_opaque(plain) is plain  # nothing to drop: the same record


def test_truncation_keeps_the_original_length() -> None:
    redactor = Redactor(RedactionSettings(max_text_chars=64))
    text = "contact jane@example.com " + "x" * 200
    item = redactor.redact_item(
        Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=text, arguments="[" + "1," * 80 + "1]")
    )
    assert item.text == ("contact [REDACTED:email] " + "x" * 200)[:64]
    assert item.attrs == {
        "text_length": len(text),
        "truncated": True,
        "arguments_length": 163,
    }
    assert item.arguments is not None and len(item.arguments) == 64


def test_huge_text_is_precut_at_a_line_break_without_leaking() -> None:
    redactor = Redactor(RedactionSettings(max_text_chars=64))
    secret_line = f"token {OPENAI_KEY}\n"
    text = secret_line * 100
    item = redactor.redact_item(Item(ItemKind.TOOL_RESULT, text=text))
    assert item.text == ("token [REDACTED:api_key]\n" * 4)[:64]
    assert item.attrs["text_length"] == len(text)
    # Redaction shrinking the pre-cut part below the limit falls back to the whole text.
    shrinking = (JWT + "\n") * 20 + "tail"
    assert (
        redactor.redact_item(Item(ItemKind.USER, text=shrinking)).text
        == (("[REDACTED:jwt]\n" * 20 + "tail")[:64])
    )


def test_a_long_text_keeps_its_head_and_tail_around_a_marker() -> None:
    redactor = Redactor(RedactionSettings(max_text_chars=1000))
    lines = [f"line {n}: ok" for n in range(400)]
    text = "\n".join([*lines, f"Traceback: KeyError for {OPENAI_KEY}", "exit status 1"])
    item = redactor.redact_item(Item(ItemKind.TOOL_RESULT, text=text))
    assert item.text is not None and len(item.text) <= 1000
    assert item.text.startswith("line 0: ok\n")
    assert item.text.endswith("Traceback: KeyError for [REDACTED:api_key]\nexit status 1")
    start, end = item.attrs["text_cut"]
    marker = item.text[start:end]
    assert marker.startswith("\n[… ") and marker.endswith(" characters cut …]\n")
    kept = len(item.text) - len(marker)
    assert f"{len(text) - kept:,} characters cut" in marker
    assert item.text[start - 1] == "\n" and item.text[end:].startswith("line ")  # at line breaks
    assert item.attrs["text_length"] == len(text) and item.attrs["truncated"] is True
    assert redactor.redact_item(item) == item  # a cut text is within the limit: stays as it is


def test_a_huge_text_is_redacted_at_both_ends_before_the_cut() -> None:
    redactor = Redactor(RedactionSettings(max_text_chars=2000))
    text = f"head {OPENAI_KEY}\n" + "filler line\n" * 100_000 + f"tail {JWT}\n"
    item = redactor.redact_item(Item(ItemKind.USER, text=text))
    assert item.text is not None and len(item.text) <= 2000
    assert item.text.startswith("head [REDACTED:api_key]\n")
    assert item.text.endswith("tail [REDACTED:jwt]\n")
    assert OPENAI_KEY not in item.text and JWT not in item.text
    assert "characters cut" in item.text[slice(*item.attrs["text_cut"])]


def test_cut_arguments_mark_their_cut() -> None:
    redactor = Redactor(RedactionSettings(max_text_chars=500))
    arguments = json.dumps({"path": "a.py", "content": "x" * 2000, "mode": "w"})
    item = redactor.redact_item(Item(ItemKind.TOOL_CALL, arguments=arguments))
    assert item.arguments is not None and item.arguments.endswith('"mode":"w"}')
    assert item.attrs["arguments_length"] == len(arguments)
    assert "characters cut" in item.arguments[slice(*item.attrs["arguments_cut"])]


def test_disabled_only_truncates() -> None:
    redactor = Redactor(RedactionSettings(enabled=False, max_text_chars=64))
    text = f"{OPENAI_KEY} " * 3
    item = redactor.redact_item(Item(ItemKind.USER, text=text, attrs={"by": "a@b.example"}))
    assert item.text == text[:64]
    assert item.attrs == {"by": "a@b.example", "text_length": len(text), "truncated": True}
    assert redactor.redact_json_text('{"password": "p"}') == '{"password": "p"}'


def test_step_items_error_path_and_violations() -> None:
    step = bare_step(
        path="/v1/chat/completions?user=jane@example.com",
        input_items=[user_text(f"use {ANTHROPIC_KEY}")],
        output_items=[assistant_text("call 415-555-2671")],
        error={
            "message": f"Incorrect API key provided: {OPENAI_KEY}",
            "code": 401,
            "param": {"api_key": "sk-short"},
        },
        violations=[
            Violation(
                ViolationKind.INVALID_TOOL_ARGUMENTS,
                "bad JSON near 'pw=a@b.example'",
                call_id="call_1",
            ),
        ],
    )
    redacted = REDACTOR.redact_step(step)
    assert redacted.path == "/v1/chat/completions?user=[REDACTED:email]"
    assert redacted.input_items[0].text == "use [REDACTED:api_key]"
    assert redacted.output_items[0].text == "call [REDACTED:phone]"
    assert redacted.error == {
        "message": "Incorrect API key provided: [REDACTED:api_key]",
        "code": 401,
        "param": {"api_key": "[REDACTED:api_key]"},
    }
    assert redacted.violations[0].detail == "bad JSON near 'pw=[REDACTED:email]'"
    assert redacted.violations[0].call_id == "call_1"
    assert step.input_items[0].text == f"use {ANTHROPIC_KEY}"  # the hot path's copy is kept


def test_redacting_twice_gives_the_same_result() -> None:
    redactor = Redactor(RedactionSettings(max_text_chars=128))
    items = [
        Item(
            ItemKind.USER,
            text=f"{OPENAI_KEY} {JWT} Bearer abc123def456ghi a@b.example "
            "+1 415 555 2671 4111-1111-1111-1111 AKIAIOSFODNN7EXAMPLE " + "y" * 200,
        ),
        Item(ItemKind.TOOL_CALL, arguments='{"token": "t", "q": "Authorization: Bearer 12345678"}'),
        Item(ItemKind.TOOL_RESULT, text='{"password": "hunter2", "x": "cut'),
    ]
    once = redactor.redact_items(items)
    assert redactor.redact_items(once) == once


def test_a_redacted_step_redacted_again_is_unchanged() -> None:
    """A background step's row is redacted before its record goes through the recording
    pipeline's redaction (gateway.proxy.background.shared): the second pass changes nothing,
    configured patterns that match a marker (their own name) included."""
    settings = RedactionSettings(
        max_text_chars=96,
        patterns=(
            RedactionPattern(name="password", regex=r"password\S*"),
            RedactionPattern(name="ticket", regex=r"[A-Z]+-\d+"),
        ),
        json_keys=("x_secret",),
    )
    redactor = Redactor(settings)
    step = bare_step(
        path="/v1/responses?user=jane@example.com",
        session_id=f"s-{OPENAI_KEY}",
        input_items=[
            user_text(f"use {ANTHROPIC_KEY} passwordHunter2 for OPS-4217"),
            user_text("passwordW " + "z" * 120 + " OPS-1"),  # cut
            Item(ItemKind.TOOL_RESULT, call_id="c1", text='{"x_secret": "v", "n": "passwordX'),
        ],
        output_items=[assistant_text(f"Bearer abc123def456ghi {JWT} +1 415 555 2671")],
        error={"message": f"bad key {OPENAI_KEY}", "param": {"api_key": "sk-short"}},
        params={"metadata": {"password": "passwordY"}, "headers": {"X-Trace": "t-1"}},
        declared_tools=({"name": "rotate", "description": "rotates passwordZ, OPS-1"},),
        violations=[Violation(ViolationKind.INVALID_TOOL_ARGUMENTS, "near passwordQ")],
    )
    once = redactor.redact_step(step)
    assert (
        once.input_items[0].text
        == "use [REDACTED:api_key] [REDACTED:password] for [REDACTED:ticket]"
    )
    assert once.input_items[1].attrs["truncated"]
    assert redactor.redact_step(once) == once


def test_deeply_nested_json_is_redacted_as_text() -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    deep = '{"a":' * 900 + json.dumps({"token": secret}) + "}" * 900  # parses, too deep to walk
    item = Item(ItemKind.TOOL_CALL, call_id="c1", tool_name="f", arguments=deep)
    redacted = REDACTOR.redact_item(item)
    assert redacted.arguments is not None and secret not in redacted.arguments
    assert "[REDACTED:" in redacted.arguments
