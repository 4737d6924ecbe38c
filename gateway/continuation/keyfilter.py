"""Which continuation keys the store may hold: a Bloom filter, so a history that continues
nothing recorded is placed without a store round trip.

Sans-IO. It answers "maybe" for every key until it knows all the store's writers: loaded
with the keys already stored and spooled, in a gateway that is the store's only writer.

Sized to the store: built for the number of keys it holds at start-up, with room for a
third more; past its capacity a layer twice as large takes the new keys (a scalable Bloom
filter), so the false "maybe" rate stays near its design while the store grows.
"""

from __future__ import annotations

from collections.abc import Iterable

HASHES = 4  # 32-bit positions taken from a key's first 32 hex digits (spelled out in add_many)
BITS_PER_KEY = 16  # at capacity: 0.24 % false "maybe" with 4 hashes; 0.6 % at a third more
HEADROOM = 4 / 3  # keys beyond the count at start-up before a layer is full
MIN_CAPACITY = 1 << 18  # keys: 512 KiB, for an empty or small store
_MAX_BITS = 1 << 32  # positions are 32-bit


class _Layer:
    """One Bloom filter of a power-of-two size, counting the keys it took."""

    __slots__ = ("bits", "capacity", "count", "mask")

    def __init__(self, capacity: int) -> None:
        size = 1 << 16  # bits
        while size < capacity * BITS_PER_KEY and size < _MAX_BITS:
            size <<= 1
        self.bits = bytearray(size >> 3)
        self.mask = size - 1
        self.capacity = size // BITS_PER_KEY
        self.count = 0

    def add(self, key: str) -> None:
        value, bits, mask = int(key[:32], 16), self.bits, self.mask
        for _ in range(HASHES):
            bit = value & mask
            bits[bit >> 3] |= 1 << (bit & 7)
            value >>= 32
        self.count += 1

    def add_many(self, keys: list[str]) -> int:
        """Add keys from the start of `keys` while there is room; how many it took. The
        start-up load adds millions: the four positions are spelled out, not looped."""
        room = max(0, min(len(keys), self.capacity - self.count))
        bits, mask = self.bits, self.mask
        for key in keys[:room]:
            value = int(key[:32], 16)
            first, second = value & mask, (value >> 32) & mask
            third, fourth = (value >> 64) & mask, (value >> 96) & mask
            bits[first >> 3] |= 1 << (first & 7)
            bits[second >> 3] |= 1 << (second & 7)
            bits[third >> 3] |= 1 << (third & 7)
            bits[fourth >> 3] |= 1 << (fourth & 7)
        self.count += room
        return room

    def holds(self, key: str) -> bool:
        value, bits, mask = int(key[:32], 16), self.bits, self.mask
        for _ in range(HASHES):
            bit = value & mask
            if not bits[bit >> 3] & (1 << (bit & 7)):
                return False
            value >>= 32
        return True


class BuiltKeys:
    """The store's keys, gathered apart from the live filter (in batches, in a thread)."""

    def __init__(self, expected: int) -> None:
        self.layers = [_Layer(max(MIN_CAPACITY, int(expected * HEADROOM)))]

    def add_all(self, keys: Iterable[str]) -> None:
        left = list(keys)
        while left := left[self.layers[-1].add_many(left) :]:
            self.layers.append(_Layer(self.layers[-1].capacity * 2))

    @property
    def size_bytes(self) -> int:
        return sum(len(layer.bits) for layer in self.layers)


def _add(layers: list[_Layer], key: str) -> None:
    layer = layers[-1]
    if layer.count >= layer.capacity:
        layer = _Layer(layer.capacity * 2)
        layers.append(layer)
    layer.add(key)


class KeyFilter:
    def __init__(self, *, authoritative_when_loaded: bool) -> None:
        self._layers: list[_Layer] = []
        self._added_before_load: list[str] | None = []
        # Only a gateway that is its store's sole writer may trust its own filter.
        self._can_trust = authoritative_when_loaded

    @property
    def can_trust(self) -> bool:
        return self._can_trust

    @property
    def authoritative(self) -> bool:
        return self._can_trust and self._added_before_load is None

    def add(self, key: str) -> None:
        if not self._can_trust:
            return  # never consulted: keep nothing
        if self._added_before_load is not None:
            self._added_before_load.append(key)  # kept until the store's keys land
        else:
            _add(self._layers, key)

    def install(self, built: BuiltKeys) -> None:
        """Take what was built from every key the store and the spool hold, with the keys
        added meanwhile; from then on "no" means no. Call it where `add` is called, so no
        update is lost."""
        layers = built.layers
        for key in self._added_before_load or ():
            _add(layers, key)
        self._layers, self._added_before_load = layers, None

    def abandon(self) -> None:
        """The store's keys cannot be loaded: answer "maybe" for good, keep nothing."""
        self._can_trust = False
        self._added_before_load = None

    def may_hold(self, key: str) -> bool:
        if not self.authoritative:
            return True
        return any(layer.holds(key) for layer in self._layers)
