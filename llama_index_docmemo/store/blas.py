"""One BLAS thread while page vectors are computed, safe when several threads compute at once.

OpenBLAS's pool is process-wide, and threadpoolctl lets one thread at a time set its size (any
other thread's limit is silently ignored) while each ``limit()`` puts back, on exit, the size it
found on entry. Two threads laying out pages at once would interleave: the second finds the
first's limit of 1, leaves last and puts 1 back, so the whole process (the app's own numpy
included) would stay at one BLAS thread. So callers take turns. What that serialises is the
vectors stage of concurrent indexing calls in one process (about 30 ms of CPU a ColQwen page,
against seconds for encoding it), not Ray's workers, which are processes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from threadpoolctl import ThreadpoolController

_turn = threading.Lock()


@cache
def _controller() -> ThreadpoolController:
    """The process's BLAS libraries, found once (finding them scans the loaded libraries)."""
    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block, one caller at a time; the size as found after it."""
    with _turn, _controller().limit(limits=1, user_api="blas"):
        yield
