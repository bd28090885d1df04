"""A bounded, thread-safe map that forgets the least recently used entries first.

The one in-memory cache of the package: reference graphs per document version (shared by an
engine's queries) and what LLM servers taught (``llms/servers.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    """At most ``capacity`` entries; reads and writes refresh an entry."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            return value

    def change(self, key: K, update: Callable[[V | None], V]) -> V:
        """``update(current or None)`` stored as one atomic step; returns the new value."""
        with self._lock:
            value = update(self._items.get(key))
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
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
        """A copy of the entries for pickling (a lock does not pickle)."""
        with self._lock:
            return {"items": OrderedDict(self._items), "capacity": self.capacity}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._items = state["items"]
        self.capacity = state["capacity"]
        self._lock = threading.Lock()
