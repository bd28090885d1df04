"""BoundedMap keeps the eviction rules of the hand-written map it replaced (cachetools inside)."""

from __future__ import annotations

import pickle
import threading

import pytest

from llama_index_docmemo.lru import BoundedMap


def test_the_least_recently_used_entry_goes_first_and_reads_refresh() -> None:
    cache: BoundedMap[str, int] = BoundedMap(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_writes_refresh_and_replace_without_evicting() -> None:
    cache: BoundedMap[str, int] = BoundedMap(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.put("a", 10) == 10  # same key: replaced, refreshed, nothing evicted
    assert len(cache) == 2
    assert cache.change("b", lambda v: (v or 0) + 1) == 3  # "b" refreshed
    cache.put("c", 4)
    assert cache.get("a") is None and cache.get("b") == 3 and cache.get("c") == 4


def test_change_starts_from_none_and_pop_and_clear_forget() -> None:
    cache: BoundedMap[str, int] = BoundedMap(3)
    assert cache.change("x", lambda v: 7 if v is None else v + 1) == 7
    assert cache.change("x", lambda v: 7 if v is None else v + 1) == 8
    cache.pop("x")
    cache.pop("never there")
    assert cache.get("x") is None
    cache.put("y", 1)
    cache.clear()
    assert len(cache) == 0


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        BoundedMap(0)


def test_change_is_atomic_under_threads() -> None:
    cache: BoundedMap[str, int] = BoundedMap(4)

    def bump() -> None:
        for _ in range(2000):
            cache.change("n", lambda v: (v or 0) + 1)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.get("n") == 8000


def test_a_pickled_copy_keeps_entries_and_their_order_of_use() -> None:
    cache: BoundedMap[str, int] = BoundedMap(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")  # "b" is the least recently used
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.capacity == 2 and copy.get("a") == 1
    copy.put("c", 3)
    assert copy.get("b") is None and copy.get("c") == 3
    assert cache.get("b") == 2  # the original is untouched
    copy.change("a", lambda v: (v or 0) + 1)  # the copy has a working lock of its own
