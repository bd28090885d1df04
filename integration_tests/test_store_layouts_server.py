"""The compressed layouts over the server path: what a Qdrant server is asked to apply.

The REST stand-in (``qdrant_standin.py``) answers from qdrant-client's local mode, which scores
exactly: it applies neither quantization nor a TurboQuant datatype. So here each layout's
collection settings are checked as sent (the part a server applies), and its search results
against local mode's exact ones; the quantized scoring itself is tested on Qdrant Edge
(tests/test_store_layouts.py) and measured by benchmarks/store_scale.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from qdrant_standin import FakeQdrant, serve_standin
from test_store_server import QUERY, document, open_remote

from llama_index_docmemo.store import MultivectorLayout, QdrantClientPageStore
from llama_index_docmemo.store.muvera import Muvera

CASES: list[tuple[MultivectorLayout, dict[str, Any]]] = [
    (MultivectorLayout(quantization="turbo4"), {"turbo": {"always_ram": True, "bits": "bits4"}}),
    (
        MultivectorLayout(storage="float16", quantization="turbo2"),
        {"turbo": {"always_ram": True, "bits": "bits2"}},
    ),
    (
        MultivectorLayout(quantization="binary", query_encoding="scalar4"),
        {"binary": {"always_ram": True, "query_encoding": "scalar4bits"}},
    ),
]


@pytest.fixture
def fake() -> Iterator[tuple[FakeQdrant, str]]:
    with serve_standin() as served:
        yield served


def _created(backend: FakeQdrant) -> dict[str, Any]:
    return next(
        body
        for method, path, body in backend.requests
        if (method, path.split("?")[0]) == ("PUT", "/collections/docmemo_pages")
    )


def _last_search(backend: FakeQdrant) -> dict[str, Any]:
    """The dense branch of the last batched query the stand-in received."""
    batches = [body for _, path, body in backend.requests if "/points/query/batch" in path]
    return batches[-1]["searches"][0]


def _fill_both(layout: MultivectorLayout, url: str) -> tuple[Any, Any]:
    remote = open_remote(url, layout=layout, sparse=False)
    local = QdrantClientPageStore(
        location=":memory:", encoder_name="enc", dim=8, sparse=False, layout=layout
    )
    for store in (remote, local):
        store.upsert_document(*document("a.pdf", "v1", "t1", seed=1))
        store.upsert_document(*document("b.pdf", "v1", "t2", seed=2))
    return remote, local


@pytest.mark.filterwarnings("ignore::UserWarning")  # local mode: search params have no effect
@pytest.mark.parametrize(("layout", "expected"), CASES, ids=["turbo4", "turbo2", "binary-scalar4"])
def test_each_compressed_rerank_copy_is_sent_as_the_layout_says(
    fake: tuple[FakeQdrant, str], layout: MultivectorLayout, expected: dict[str, Any]
) -> None:
    backend, url = fake
    remote, local = _fill_both(layout, url)
    sent = _created(backend)["vectors"]["multi"]
    assert sent["quantization_config"] == expected
    got = remote.search(QUERY, limit=4)
    assert [h.record for h in got] == [h.record for h in local.search(QUERY, limit=4)]
    rerank = _last_search(backend)
    assert rerank["params"]["quantization"] == {
        "rescore": True,
        "oversampling": layout.oversampling,
    }
    remote.close()
    local.close()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_turbo8_originals_and_the_muvera_first_stage_are_sent_and_searched(
    fake: tuple[FakeQdrant, str],
) -> None:
    backend, url = fake
    layout = MultivectorLayout(
        first_stage="muvera", storage="turbo8", muvera=Muvera(k_sim=2, dim_proj=4, reps=3)
    )
    remote, local = _fill_both(layout, url)
    vectors = _created(backend)["vectors"]
    assert vectors["multi"]["datatype"] == "turbo8"
    assert vectors["muvera"] == {"size": 3 * 4 * 4, "distance": "Dot", "datatype": "float16"}
    got = remote.search(QUERY, limit=3, prefetch_limit=6)
    assert [h.record for h in got] == [
        h.record for h in local.search(QUERY, limit=3, prefetch_limit=6)
    ]
    first_stage = _last_search(backend)["prefetch"][0]
    assert first_stage["using"] == "muvera" and len(first_stage["query"]) == 48
    remote.close()
    local.close()
