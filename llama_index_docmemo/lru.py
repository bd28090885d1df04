"""A bounded, thread-safe map that forgets the least recently used entries first.

The one in-memory cache of the package: reference graphs per document version (shared by an
engine's queries) and what LLM servers taught (``llms/servers.py``). The eviction is
``cachetools.LRUCache``'s; this adds the lock that concurrent queries need and pickling without it.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    """At most ``capacity`` entries; reads and writes refresh an entry."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._items: LRUCache[K, V] = LRUCache(maxsize=capacity)
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return int(self._items.maxsize)

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._items[key] = value
            return value

    def change(self, key: K, update: Callable[[V | None], V]) -> V:
        """``update(current or None)`` stored as one atomic step; returns the new value."""
        with self._lock:
            value = update(self._items.get(key))
            self._items[key] = value
            return value

    def pop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __getstate__(self) -> dict[str, Any]:
        """The entries, in their order of use, taken under the lock (a lock does not pickle)."""
        with self._lock:
            return {"items": pickle.dumps(self._items)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._items = pickle.loads(state["items"])  # noqa: S301 - our own bytes, just written
        self._lock = threading.Lock()
