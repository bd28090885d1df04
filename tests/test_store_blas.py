"""Page vectors computed by two threads at once leave the process's BLAS thread count as it was."""

from __future__ import annotations

import threading
import time

import numpy as np  # noqa: F401  (loads the BLAS library threadpoolctl is to find)
import pytest
from threadpoolctl import threadpool_info

from llama_index_docmemo.store.blas import one_blas_thread


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture()
def blas_pool() -> set[int]:
    """The process's BLAS thread count before the test (more than one, or nothing to see)."""
    found = blas_threads()
    if not found or found == {1}:
        pytest.skip(f"threadpoolctl finds BLAS thread counts {found or 'none'}: nothing to limit")
    return found


def test_a_caller_overlapping_another_still_gets_one_thread_and_the_count_comes_back(
    blas_pool: set[int],
) -> None:
    a_in, b_started, a_out = threading.Event(), threading.Event(), threading.Event()
    inside: dict[str, set[int]] = {}

    def a() -> None:
        with one_blas_thread():
            inside["a"] = blas_threads()
            a_in.set()
            b_started.wait(2)
            time.sleep(0.1)  # b asks for its limit while a still holds one
        a_out.set()

    def b() -> None:
        a_in.wait(2)
        b_started.set()
        with one_blas_thread():
            a_out.wait(2)  # b computes on after a has left
            inside["b"] = blas_threads()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert inside == {"a": {1}, "b": {1}}
    assert blas_threads() == blas_pool


def test_a_failing_block_gives_the_count_back(blas_pool: set[int]) -> None:
    with pytest.raises(RuntimeError), one_blas_thread():
        assert blas_threads() == {1}
        raise RuntimeError("layout failed")
    assert blas_threads() == blas_pool
