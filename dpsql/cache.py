"""One small thread-safe LRU cache, used by every cache in dpsql (plans, rewritten engine SQL,
normalised query texts, the server's statement and catalog caches).

Every cache in dpsql holds values computed from public inputs only (SQL text, privacy
parameters, metadata, the engine's schema), never from data, so a hit or a miss reveals nothing
about the data; the cache only has to be correct under threads and bounded in size. One lock
guards each cache; values are computed *outside* it (planning takes milliseconds, and must not
serialise every thread), so two threads missing the same key may both compute it. The first
value stored wins and both get it, so a cached object is shared, never replaced: callers must
treat cached values as immutable. None is not a value (it means "not cached").
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


class LRU(Generic[K, V]):
    """A mapping of at most ``size`` entries; the least recently used one goes first."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an LRU cache needs a size >= 1, not {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value cached for ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        """Cache ``value`` for ``key`` unless one is cached already; return the cached one."""
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached
            self._entries[key] = value
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
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

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries
