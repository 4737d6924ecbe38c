"""Which continuation keys the store may hold: a Bloom filter, so a history that continues
nothing recorded is placed without a store round trip.

Sans-IO. It answers "maybe" for every key until it knows all the store's writers: loaded
with the keys already stored and spooled, in a gateway that is the store's only writer.
"""

from __future__ import annotations

from collections.abc import Iterable

_HASHES = 3
_MIN_BITS = 1 << 24  # 2 MiB: under 0.5 % false "maybe" up to a million keys


class KeyFilter:
    def __init__(self, *, authoritative_when_loaded: bool, expected: int = 0) -> None:
        bits = _MIN_BITS
        while bits < expected * 16:
            bits <<= 1
        self._mask = bits - 1
        self._bits = bytearray(bits >> 3)
        # Only a gateway that is its store's sole writer may trust its own filter.
        self._can_trust = authoritative_when_loaded
        self._loaded = False

    @property
    def authoritative(self) -> bool:
        return self._can_trust and self._loaded

    def _positions(self, key: str) -> list[int]:
        # Keys are hex of a keyed hash: any 32 bits of them are uniformly distributed.
        return [int(key[i * 8 : i * 8 + 8], 16) & self._mask for i in range(_HASHES)]

    def add(self, key: str) -> None:
        _set(self._bits, self._mask, key)

    def build(self, keys: Iterable[str]) -> bytes:
        """Bits for `keys`, built apart from the live ones (in a thread, say)."""
        bits = bytearray(len(self._bits))
        for key in keys:
            _set(bits, self._mask, key)
        return bytes(bits)

    def install(self, built: bytes) -> None:
        """Add what `build` made for every key the store and the spool hold; from then on
        "no" means no. Call it where `add` is called, so no update is lost."""
        size = len(self._bits)
        merged = int.from_bytes(self._bits, "little") | int.from_bytes(built, "little")
        self._bits[:] = merged.to_bytes(size, "little")
        self._loaded = True

    def may_hold(self, key: str) -> bool:
        if not self.authoritative:
            return True
        return all(self._bits[bit >> 3] & (1 << (bit & 7)) for bit in self._positions(key))


def _set(bits: bytearray, mask: int, key: str) -> None:
    for i in range(_HASHES):
        bit = int(key[i * 8 : i * 8 + 8], 16) & mask
        bits[bit >> 3] |= 1 << (bit & 7)
