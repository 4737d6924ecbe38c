"""Keyed digests of the payloads a provider wants back."""

from __future__ import annotations

import re

from gateway.config import RedactionSettings
from gateway.opaque import UNKEYED, Digests
from gateway.protocols.registry import ADAPTERS, ENDPOINTS, keyed
from gateway.redaction.redactor import Redactor


def test_a_digest_is_short_stable_and_keyed() -> None:
    one, again, other = Digests(b"install a"), Digests(b"install a"), Digests(b"install b")
    assert one.of("EroCC-signature") == again.of("EroCC-signature")
    assert one.of("EroCC-signature") != other.of("EroCC-signature")
    assert one.of("EroCC-signature") != one.of("EroCC-signaturf")
    assert re.fullmatch(r"[a-p]{16}", one.of("EroCC-signature"))
    assert one.of("\ud800 lone surrogate")  # whatever JSON text decoded to


def test_no_redaction_rule_changes_a_digest() -> None:
    """Letters only: a digest stored redacted must still equal the one held in memory."""
    redactor = Redactor(RedactionSettings())
    digests = [UNKEYED.of(str(n)) for n in range(2000)]
    assert [redactor.redact_text(d) for d in digests] == digests


def test_an_app_keys_every_adapter() -> None:
    adapters = keyed(b"install secret")
    served = {**ADAPTERS, **ENDPOINTS}  # the protocols, and endpoints served by a variant
    assert adapters.keys() == served.keys()
    for key, adapter in adapters.items():
        assert adapter.name == served[key].name and type(adapter) is type(served[key])
