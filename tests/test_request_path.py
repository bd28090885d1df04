"""One reading request crosses at most four package modules (issue 45), measured by
``benchmarks/request_path.py``: the reader, the exchange, the LLM and the wire, in that order, on
the sync and the async driver."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark

request_path = load_benchmark("request_path")

PATH = [
    "llama_index_docmemo.readers.vlm",
    "llama_index_docmemo.llms.exchange",
    "llama_index_docmemo.llms.openai_compatible",
    "llama_index_docmemo.llms.wire",
]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_reading_request_crosses_at_most_four_modules(use_async: bool) -> None:
    path, ran = request_path.reading_path(use_async)
    assert len(path) <= 4, " -> ".join(path)
    assert path == PATH  # the steps runtime and the worker threads were followed, not cut
    assert set(path) <= set(ran)
