"""One small thread-safe LRU cache, used by every cache in dpsql (plans, rewritten engine SQL,
normalised query texts, the server's statement and catalog caches).

Every cache in dpsql holds values computed from public inputs only (SQL text, privacy
parameters, metadata, the engine's schema), never from data, so a hit or a miss reveals nothing
about the data; the cache only has to be correct under threads and bounded in size. One lock
guards each cache; values are computed *outside* it (planning takes milliseconds, and must not
serialise every thread), so two threads missing the same key may both compute it. The first
value stored wins and both get it, so a cached object is shared, never replaced: callers must
treat cached values as immutable. None is not a value (it means "not cached").

Each cache is bounded twice: by entries and by an estimate of the bytes its entries hold. An
entry's weight is what its texts will cost once parsed (:func:`weigh`: a parsed sqlglot tree
holds about 210 bytes per character of SQL, measured with tracemalloc on a 1,000-term ``OR``
chain), so a few long statements evict many short ones instead of pinning gigabytes; a single
entry heavier than the whole budget is not cached at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Rewritten queries each engine keeps (``Engine.rewritten``): one per cached plan.
REWRITTEN_CACHE_SIZE = 512
#: The byte budget of each cache (estimated by :func:`weigh`).
DEFAULT_MAX_BYTES = 64 << 20
#: Estimated bytes per character of SQL text held in a cache entry (its parse, its plan).
BYTES_PER_CHAR = 256
_ENTRY_OVERHEAD = 1024


def weigh(key: object, value: object) -> int:
    """The estimated bytes of one entry: a fixed overhead plus :data:`BYTES_PER_CHAR` for each
    character of text in its key and value (strings, or strings in a tuple or list)."""
    return _ENTRY_OVERHEAD + BYTES_PER_CHAR * (_text_size(key) + _text_size(value))


def _text_size(obj: object, depth: int = 0) -> int:
    if isinstance(obj, str | bytes):
        return len(obj)
    if isinstance(obj, tuple | list) and depth < 2:
        return sum(_text_size(o, depth + 1) for o in obj)
    return 0


class LRU(Generic[K, V]):
    """A mapping of at most ``size`` entries and ``max_bytes`` estimated bytes (:func:`weigh`);
    the least recently used entries go first."""

    def __init__(self, size: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if size < 1:
            raise ValueError(f"an LRU cache needs a size >= 1, not {size}")
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value cached for ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V) -> V:
        """Cache ``value`` for ``key`` unless one is cached already; return the cached one."""
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached[0]
            weight = weigh(key, value)
            if weight > self.max_bytes:
                return value
            self._entries[key] = (value, weight)
            self.bytes += weight
            while len(self._entries) > self.size or self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped
            return value

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The cached value for ``key``, else ``compute()`` cached. An exception from
        ``compute`` (a refused query, say) propagates and nothing is cached."""
        cached = self.get(key)
        if cached is not None:
            return cached
        return self.put(key, compute())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries
