"""Deterministic search: the same query on the same store gives the same ranking and scores.

Pages without text share one dense vector and have no lexical vector, and many lexical scores tie:
Qdrant orders such ties by chance (segment and hash-map order), which used to change the fused
top-30 from one call to the next. Each backend now fuses ordered branches itself
(``store.reads.fuse_branches``); these tests repeat searches on both backends and check the rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore, reads
from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT
from llama_index_docmemo.store.operations import SearchPlan
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import FieldGroup, PageEmbedding, PageRecord, SparseVector

DIM = 8


def tied_document(doc_id: str, n_pages: int, seed: int) -> tuple[DocumentSchema, list, list]:
    """Every third page text-less (shared dense vector, no lexical terms); lexical weights all 1."""
    rng = np.random.default_rng(seed)
    schema = DocumentSchema(doc_id=doc_id, doc_version="v1", n_pages=n_pages)
    records, embeddings = [], []
    for page in range(1, n_pages + 1):
        textless = page % 3 == 0
        records.append(PageRecord(doc_id, "v1", page, n_pages, "" if textless else "t", "src"))
        if textless:
            ones = np.ones((1, DIM), np.float32)
            embeddings.append(PageEmbedding(ones, ones[0], SparseVector((), ())))
        else:
            multi = rng.normal(size=(3, DIM)).astype(np.float32)
            terms = tuple(sorted(int(t) for t in rng.choice(12, 3, replace=False)))
            embeddings.append(PageEmbedding(multi, multi.mean(0), SparseVector(terms, (1.0,) * 3)))
    return schema, records, embeddings


QUERY = PageEmbedding(
    np.ones((2, DIM), np.float32), np.ones(DIM, np.float32), SparseVector((1, 2, 3), (1.0,) * 3)
)


def fill(store: PageStore) -> PageStore:
    for index in range(3):
        store.upsert_document(*tied_document(f"d{index}.pdf", 40, seed=index))
    return store


@pytest.fixture(params=("edge", "client"))
def tied_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PageStore]:
    options = {"encoder_name": "test", "dim": DIM, "sparse": True}
    if request.param == "edge":
        store: PageStore = EdgePageStore(tmp_path / "edge", **options)  # type: ignore[arg-type]
    else:
        store = QdrantClientPageStore(location=":memory:", **options)  # type: ignore[arg-type]
    yield fill(store)
    store.close()


def ranking(store: PageStore, **kwargs: object) -> list[tuple[str, int, float]]:
    hits = store.search(QUERY, limit=30, **kwargs)  # type: ignore[arg-type]
    return [(h.record.doc_id, h.record.page, h.score) for h in hits]


@pytest.mark.parametrize("scope", [None, PageFilter(doc_ids=("d1.pdf",))])
def test_repeated_searches_are_identical(tied_store: PageStore, scope: PageFilter | None) -> None:
    first = ranking(tied_store, page_filter=scope)
    assert len(first) == 30
    assert any(page % 3 == 0 for _, page, _ in first)  # text-less pages take part
    for _ in range(15):
        assert ranking(tied_store, page_filter=scope) == first


def test_ties_are_broken_by_document_and_page(tied_store: PageStore) -> None:
    hits = ranking(tied_store)
    for (doc_a, page_a, score_a), (doc_b, page_b, score_b) in zip(hits, hits[1:], strict=False):
        assert score_a > score_b or (score_a == score_b and (doc_a, page_a) < (doc_b, page_b))


def test_both_backends_rank_alike(tmp_path: Path) -> None:
    options = {"encoder_name": "test", "dim": DIM, "sparse": True}
    edge = fill(EdgePageStore(tmp_path / "edge", **options))  # type: ignore[arg-type]
    client = fill(QdrantClientPageStore(location=":memory:", **options))  # type: ignore[arg-type]
    try:
        a, b = ranking(edge), ranking(client)
        assert [(d, p) for d, p, _ in a] == [(d, p) for d, p, _ in b]
        assert [s for *_, s in a] == pytest.approx([s for *_, s in b], abs=1e-5)
    finally:
        edge.close()
        client.close()


def _plan(limit: int, method: str = "rrf") -> SearchPlan:
    return SearchPlan(
        multi=np.zeros((1, 1), np.float32),
        first_stage=np.zeros(1, np.float32),
        sparse=None,
        where=FieldGroup("and", ()),
        limit=limit,
        prefetch=50,
        fusion=method,  # type: ignore[arg-type]
        idf_scope="filter",
        layout=DEFAULT_LAYOUT,
    )


def hit(page: int, score: float, doc_id: str = "d.pdf") -> tuple[dict[str, object], float]:
    return ({"doc_id": doc_id, "page": page}, score)


def test_fusion_is_weighted_rrf_with_fixed_tie_order() -> None:
    dense = [hit(5, 0.9), hit(3, 0.9), hit(1, 0.2)]  # 3 and 5 tie: 3 ranks first
    lexical = [hit(1, 2.0), hit(7, 1.0)]
    fused = reads.fuse_branches([dense, lexical], _plan(10))
    scores = {p["page"]: s for p, s in fused}
    w_dense, w_lex = reads.RRF_WEIGHTS
    assert scores[3] == pytest.approx(reads.rrf_score(1, w_dense))
    assert scores[5] == pytest.approx(reads.rrf_score(2, w_dense))
    assert scores[1] == pytest.approx(reads.rrf_score(3, w_dense) + reads.rrf_score(1, w_lex))
    assert [p["page"] for p, _ in fused] == sorted(scores, key=lambda q: -scores[q])
    # the input order of tied hits does not matter
    assert reads.fuse_branches([list(reversed(dense)), lexical], _plan(10)) == fused
    assert [p["page"] for p, _ in reads.fuse_branches([dense, lexical], _plan(2))] == [1, 7]


def test_equal_fused_scores_go_to_the_lower_document_and_page() -> None:
    branches = [[hit(9, 1.0, "b.pdf"), hit(2, 1.0, "a.pdf")], []]
    fused = reads.fuse_branches(branches, _plan(2))
    assert [(p["doc_id"], p["page"]) for p, _ in fused] == [("a.pdf", 2), ("b.pdf", 9)]
    single = reads.fuse_branches([[hit(4, 0.5), hit(2, 0.5), hit(8, 0.7)]], _plan(2))
    assert [p["page"] for p, _ in single] == [8, 2]


def test_dbsf_normalises_each_branch() -> None:
    dense = [hit(1, 3.0), hit(2, 2.0), hit(3, 1.0)]
    fused = dict(
        (p["page"], s) for p, s in reads.fuse_branches([dense, [hit(3, 5.0)]], _plan(5, "dbsf"))
    )
    # mean 2, sample sd 1 -> (s - (2 - 3)) / 6; a one-hit branch gives 0.5
    assert fused[1] == pytest.approx(4 / 6) and fused[2] == pytest.approx(3 / 6)
    assert fused[3] == pytest.approx(2 / 6 + 0.5)
