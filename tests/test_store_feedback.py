"""Recommend / discovery queries on stored page vectors, on both backends (congruence pattern).

Each case runs on Qdrant Edge and on qdrant-client's local mode; ``compare`` tests run one
scenario on both and require the same pages in the same order with close scores.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.types import PageFilter, PageHit, PageRef
from tests.test_store_backends import BACKENDS, corpus, make_query, open_store_on


@pytest.fixture(scope="module", params=BACKENDS)
def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PageStore:
    filled = open_store_on(request.param, tmp_path_factory.mktemp("feedback"))
    for document in corpus():
        filled.upsert_document(*document)
    yield filled  # type: ignore[misc]
    filled.close()


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def pooled_of(ref: PageRef) -> np.ndarray:
    for _, records, embeddings in corpus():
        for record, embedding in zip(records, embeddings, strict=True):
            if record.ref == ref:
                return unit(embedding.pooled.astype(np.float64))
    raise KeyError(ref)


def all_refs() -> list[PageRef]:
    return [r.ref for _, records, _ in corpus() for r in records]


A1, A2, B1, C3 = (
    PageRef("alpha.pdf", 1),
    PageRef("alpha.pdf", 2),
    PageRef("beta.pdf", 1),
    PageRef("gamma.pdf", 3),
)


def test_recommend_best_score_with_positives_is_nearest_to_the_best_example(
    shared: PageStore,
) -> None:
    hits = shared.feedback_search([A1, C3], limit=20)
    expected = sorted(
        (
            (ref, max(float(pooled_of(ref) @ pooled_of(p)) for p in (A1, C3)))
            for ref in all_refs()
            if ref not in (A1, C3)
        ),
        key=lambda item: (-item[1], item[0].doc_id, item[0].page),
    )
    # Qdrant rescales best-score similarities monotonically (a fast sigmoid): same order.
    assert [h.ref for h in hits] == [ref for ref, _ in expected]
    fast_sigmoid = [0.5 * (1 + s / (1 + abs(s))) for _, s in expected]
    assert [h.score for h in hits] == pytest.approx(fast_sigmoid, abs=1e-4)


def test_examples_are_never_returned_and_limit_holds(shared: PageStore) -> None:
    hits = shared.feedback_search([A1], [B1], limit=3)
    assert len(hits) == 3
    assert not {A1, B1} & {h.ref for h in hits}


def test_negatives_push_similar_pages_down(shared: PageStore) -> None:
    without = [h.ref for h in shared.feedback_search([A1], limit=20)]
    near_negative = without[0]
    with_negative = [h.ref for h in shared.feedback_search([A1], [near_negative], limit=20)]
    assert near_negative not in with_negative
    closest_to_negative = max(
        (r for r in with_negative), key=lambda r: float(pooled_of(r) @ pooled_of(near_negative))
    )
    assert with_negative.index(closest_to_negative) >= without.index(closest_to_negative) - 1


def test_filters_apply_to_results_and_examples(shared: PageStore) -> None:
    t1 = PageFilter(tenant="t1", acl_groups=("g1", "g2"))
    scoped = shared.feedback_search([A1], limit=20, page_filter=t1)
    assert scoped and {h.ref.doc_id for h in scoped} <= {"alpha.pdf", "beta.pdf"}
    acl = shared.feedback_search(
        [A1], limit=20, page_filter=PageFilter(tenant="t1", acl_groups=("g2",))
    )
    assert acl == []  # the only example is invisible to group g2: no example, no result
    assert shared.feedback_search([A1], limit=20, page_filter=PageFilter(tenant="t1")) == []
    docs = shared.feedback_search(
        [A1, B1],
        limit=20,
        page_filter=PageFilter(doc_ids=("beta.pdf",), tenant="t1", acl_groups=("g1", "g2")),
    )
    assert {h.ref.doc_id for h in docs} == {"beta.pdf"}
    assert shared.feedback_search([A1], limit=5, page_filter=PageFilter(doc_ids=())) == []


@pytest.mark.parametrize("using", ["pooled", "multi"])
@pytest.mark.parametrize("strategy", ["best_score", "sum_scores"])
def test_every_vector_and_strategy_answers(shared: PageStore, using: str, strategy: str) -> None:
    hits = shared.feedback_search([A1, A2], [B1], limit=5, using=using, strategy=strategy)
    assert len(hits) == 5
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_discovery_with_a_target(shared: PageStore) -> None:
    hits = shared.feedback_search([A1], [B1], limit=6, target=make_query(2))
    assert len(hits) == 6 and not {A1, B1} & {h.ref for h in hits}


def test_bad_arguments_raise(shared: PageStore) -> None:
    with pytest.raises(StoreError, match="feedback vector"):
        shared.feedback_search([A1], limit=3, using="sparse")
    with pytest.raises(StoreError, match="strategy"):
        shared.feedback_search([A1], limit=3, strategy="average")
    with pytest.raises(StoreError, match="limit"):
        shared.feedback_search([A1], limit=0)
    assert shared.feedback_search([], limit=3) == []
    assert shared.feedback_search([PageRef("missing.pdf", 1)], limit=3) == []


def assert_same(edge: list[PageHit], client: list[PageHit]) -> None:
    assert [h.ref for h in edge] == [h.ref for h in client]
    assert [h.score for h in edge] == pytest.approx([h.score for h in client], abs=1e-4)


@pytest.mark.parametrize("using", ["pooled", "multi"])
@pytest.mark.parametrize("strategy", ["best_score", "sum_scores"])
@pytest.mark.parametrize("discover", [False, True])
def test_backends_agree_on_feedback_search(
    tmp_path: Path, using: str, strategy: str, discover: bool
) -> None:
    results = []
    for backend in BACKENDS:
        store = open_store_on(backend, tmp_path / backend)
        try:
            for document in corpus():
                store.upsert_document(*document)
            results.append(
                store.feedback_search(
                    [A1, C3],
                    [B1, A2],
                    limit=8,
                    using=using,
                    strategy=strategy,
                    target=make_query(3) if discover else None,
                    page_filter=None,  # the owner's view: examples from two tenants
                )
            )
        finally:
            store.close()
    assert_same(*results)
