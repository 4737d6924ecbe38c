"""Short keyed digests of the opaque payloads a provider wants back (thinking signatures,
thought signatures, encrypted reasoning): what the adapters record in their place, so that a
later request can be told to have sent them back without the payloads ever being stored.
"""

from __future__ import annotations

from hashlib import blake2b

# Hex digits spelled as letters: a digest is then never read as a number (a card or a phone
# number) by a redaction rule, which would change it in the store and not in memory.
_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


class Digests:
    """Hashes payloads under a key derived from a secret: an app keys its adapters with its
    install secret (`ProtocolAdapter.keyed`), shared by every gateway on its store, so a
    digest recorded by one matches the echo another parses, and reveals nothing of the
    payload to a reader of the store."""

    __slots__ = ("_key", "keep")

    def __init__(self, secret: bytes, *, keep: bool = False) -> None:
        self._key = blake2b(secret, digest_size=32, person=b"lw-returned").digest()
        # `keep_opaque_reasoning`: the adapters keep the payloads too, as opaque blobs.
        self.keep = keep

    def of(self, payload: str) -> str:
        raw = blake2b(payload.encode("utf-8", "surrogatepass"), key=self._key, digest_size=8)
        return raw.hexdigest().translate(_LETTERS)


# The key of the adapters' module instances (tests, and the error bodies of requests no app
# keyed adapter saw): a running gateway's adapters use its install secret instead.
UNKEYED = Digests(b"loopwatch adapters before an app keys them")
