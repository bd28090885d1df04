"""Congruence tests: the same cases on Qdrant Edge and on qdrant-client's local mode.

Each behavioural test runs once per backend; the ``compare`` tests run one scenario on both
and require the same pages in the same order with close scores. Vectors are small, seeded and
random (no encoder), so exact MaxSim scores can be recomputed with numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.operations import prefetch_for
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageEmbedding, PageHit, PageRecord, PageRef, SparseVector

DIM = 16
G12 = ("g1", "g2")
VOCAB = 40
BACKENDS = ("edge", "client")

Document = tuple[DocumentSchema, list[PageRecord], list[PageEmbedding]]


def make_document(
    doc_id: str,
    version: str,
    n_pages: int,
    *,
    seed: int,
    tenant: str | None = None,
    acl: tuple[str, ...] = (),
    sparse: bool = True,
) -> Document:
    rng = np.random.default_rng(seed)
    schema = DocumentSchema(
        doc_id=doc_id,
        doc_version=version,
        n_pages=n_pages,
        source=f"/docs/{doc_id}",
        tenant=tenant,
        acl=list(acl),
        page_sections={p: f"Section {1 + (p - 1) // 2}" for p in range(1, n_pages + 1)},
    )
    records = [
        PageRecord(
            doc_id=doc_id,
            doc_version=version,
            page=page,
            n_pages=n_pages,
            text=f"{doc_id} page {page} {version}",
            source=f"/docs/{doc_id}",
            section=schema.section_of(page),
            tenant=tenant,
            acl=list(acl),
            width=595.0,
            height=842.0,
        )
        for page in range(1, n_pages + 1)
    ]
    embeddings = []
    for _ in records:
        terms = rng.choice(VOCAB, size=5, replace=False)
        embeddings.append(
            PageEmbedding(
                rng.normal(size=(int(rng.integers(2, 7)), DIM)).astype(np.float32),
                rng.normal(size=DIM).astype(np.float32),
                SparseVector(
                    tuple(int(t) for t in terms), tuple(float(w) for w in rng.uniform(0.5, 2, 5))
                )
                if sparse
                else None,
            )
        )
    return schema, records, embeddings


def corpus() -> list[Document]:
    return [
        make_document("alpha.pdf", "a1", 6, seed=1, tenant="t1", acl=("g1",)),
        make_document("beta.pdf", "b1", 4, seed=2, tenant="t1", acl=("g2",)),
        make_document("gamma.pdf", "c1", 5, seed=3, tenant="t2", acl=("g1", "g3")),
    ]


def make_query(seed: int, *, sparse: bool = True) -> PageEmbedding:
    rng = np.random.default_rng(100 + seed)
    terms = rng.choice(VOCAB, size=6, replace=False)
    return PageEmbedding(
        rng.normal(size=(3, DIM)).astype(np.float32),
        rng.normal(size=DIM).astype(np.float32),
        SparseVector(tuple(int(t) for t in terms), (1.0,) * 6) if sparse else None,
    )


StoreFactory = Callable[..., PageStore]


def open_store_on(backend: str, folder: Path, **options: object) -> PageStore:
    settings: dict[str, object] = {"encoder_name": "test-encoder", "dim": DIM, "sparse": True}
    settings.update(options)
    if backend == "edge":
        return EdgePageStore(folder, **settings)  # type: ignore[arg-type]
    return QdrantClientPageStore(location=":memory:", **settings)  # type: ignore[arg-type]


@pytest.fixture
def open_backend(tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens stores of either backend on fresh storage; closes them at the end of the test."""
    opened: list[PageStore] = []

    def factory(backend: str, **options: object) -> PageStore:
        opened.append(open_store_on(backend, tmp_path / f"{backend}-{len(opened)}", **options))
        return opened[-1]

    yield factory
    for store in opened:
        store.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, open_backend: StoreFactory) -> PageStore:
    """A filled store the test may change."""
    filled = open_backend(request.param)
    for document in corpus():
        filled.upsert_document(*document)
    return filled


@pytest.fixture(scope="module", params=BACKENDS)
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PageStore]:
    """A filled store shared by the tests that only read (creating an Edge shard takes ~1 s)."""
    filled = open_store_on(request.param, tmp_path_factory.mktemp("shared"))
    for document in corpus():
        filled.upsert_document(*document)
    yield filled
    filled.close()


def refs(hits: list[PageHit]) -> list[PageRef]:
    return [hit.ref for hit in hits]


def maxsim_ranking(documents: list[Document], query: PageEmbedding) -> list[tuple[PageRef, float]]:
    """Reference MaxSim over cosine similarity, computed with numpy."""

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    q = unit(query.multivector.astype(np.float64))
    scored = [
        (record.ref, float((q @ unit(emb.multivector.astype(np.float64)).T).max(axis=1).sum()))
        for _, records, embeddings in documents
        for record, emb in zip(records, embeddings, strict=True)
    ]
    return sorted(scored, key=lambda item: -item[1])


# ---------------------------------------------------------------- behaviour on each backend


def test_upsert_stores_pages_and_schema(shared: PageStore) -> None:
    assert shared.count_pages() == 15
    assert shared.document_version("beta.pdf", tenant="t1") == "b1"
    assert shared.document_version("beta.pdf") is None  # identity is (tenant, doc id)
    assert shared.document_version("missing.pdf") is None
    assert shared.get_schema("gamma.pdf", tenant="t2") == corpus()[2][0]
    assert shared.get_schema("missing.pdf") is None
    assert [s.doc_id for s in shared.list_documents()] == ["alpha.pdf", "beta.pdf", "gamma.pdf"]
    hit = shared.search(make_query(0, sparse=False), limit=1)[0]
    assert hit.record == corpus_record(hit.ref)


def corpus_record(ref: PageRef) -> PageRecord:
    return next(r for _, records, _ in corpus() for r in records if r.ref == ref)


def test_reupsert_same_version_is_idempotent(store: PageStore) -> None:
    query = make_query(1)
    before = store.search(query, limit=10)
    store.upsert_document(*corpus()[0])
    assert store.count_pages() == 15
    assert [(h.ref, h.score) for h in store.search(query, limit=10)] == [
        (h.ref, h.score) for h in before
    ]


def test_new_version_replaces_every_page(store: PageStore) -> None:
    store.upsert_document(*make_document("alpha.pdf", "a2", 3, seed=9, tenant="t1", acl=("g1",)))
    assert store.document_version("alpha.pdf", tenant="t1") == "a2"
    only_alpha = PageFilter(doc_ids=("alpha.pdf",), tenant="t1", acl_groups=("g1",))
    assert store.count_pages(only_alpha) == 3
    assert store.count_pages() == 12
    hits = store.search(make_query(2), limit=50, page_filter=only_alpha)
    assert {h.record.doc_version for h in hits} == {"a2"} and len(hits) == 3
    pages = store.get_pages([PageRef("alpha.pdf", p) for p in range(1, 7)])
    assert [(r.page, r.doc_version) for r in pages] == [(1, "a2"), (2, "a2"), (3, "a2")]


def test_failed_upsert_keeps_what_was_stored(store: PageStore) -> None:
    schema, records, embeddings = make_document("alpha.pdf", "a2", 6, seed=9, tenant="t1")
    bad = PageEmbedding(np.ones((2, DIM + 1), np.float32), np.ones(DIM, np.float32))
    with pytest.raises(StoreError, match=r"'alpha.pdf'.*page 4: multivector.*\(2, 17\)"):
        store.upsert_document(schema, records, [*embeddings[:3], bad, *embeddings[4:]])
    assert store.document_version("alpha.pdf", tenant="t1") == "a1"
    assert store.count_pages() == 15
    assert {r.doc_version for r in store.get_pages([PageRef("alpha.pdf", 1)])} == {"a1"}


def test_query_with_wrong_dimension_is_rejected(shared: PageStore) -> None:
    query = PageEmbedding(np.ones((2, DIM - 1), np.float32), np.ones(DIM - 1, np.float32))
    with pytest.raises(StoreError, match=r"query: multivector.*\(2, 15\)"):
        shared.search(query, limit=3)


@pytest.mark.parametrize("sparse_query", [False, True])
@pytest.mark.parametrize(
    ("page_filter", "allowed"),
    [
        (PageFilter(doc_ids=("beta.pdf", "gamma.pdf"), tenant="t1", acl_groups=G12), {"beta.pdf"}),
        (PageFilter(tenant="t1", acl_groups=G12), {"alpha.pdf", "beta.pdf"}),
        (PageFilter(tenant="t2", acl_groups=("g3", "nobody")), {"gamma.pdf"}),
        (PageFilter(tenant="t1", acl_groups=("g1",)), {"alpha.pdf"}),
        (PageFilter(tenant="t1"), set()),  # deny by default: every t1 document has an ACL
        (PageFilter(acl_groups=("g1", "g2", "g3")), set()),  # no tenant: untenanted only
        (PageFilter(doc_ids=(), tenant="t1", acl_groups=G12), set()),
        (PageFilter(tenant="t1", acl_groups=()), set()),
        (PageFilter(tenant="t9", acl_groups=G12), set()),
    ],
)
def test_filters_apply_to_search_count_and_listing(
    shared: PageStore, page_filter: PageFilter, allowed: set[str], sparse_query: bool
) -> None:
    # a small prefetch: filtered pages must not crowd out allowed ones in the first stage
    hits = shared.search(
        make_query(3, sparse=sparse_query), limit=20, page_filter=page_filter, prefetch_limit=2
    )
    expected_pages = {"alpha.pdf": 6, "beta.pdf": 4, "gamma.pdf": 5}
    total = sum(expected_pages[d] for d in allowed)
    assert {h.ref.doc_id for h in hits} == allowed
    assert shared.count_pages(page_filter) == total
    assert [s.doc_id for s in shared.list_documents(page_filter)] == sorted(allowed)


def test_dense_search_is_maxsim_over_the_pooled_prefetch(shared: PageStore) -> None:
    query = make_query(4, sparse=False)
    expected = maxsim_ranking(corpus(), query)
    hits = shared.search(query, limit=5, prefetch_limit=100)
    assert refs(hits) == [ref for ref, _ in expected[:5]]
    np.testing.assert_allclose([h.score for h in hits], [s for _, s in expected[:5]], rtol=1e-4)
    # with a prefetch of 3, only the 3 best pages by pooled cosine are reranked
    pooled = {
        r.ref: float(
            e.pooled @ query.pooled / np.linalg.norm(e.pooled) / np.linalg.norm(query.pooled)
        )
        for _, records, embeddings in corpus()
        for r, e in zip(records, embeddings, strict=True)
    }
    top3 = set(sorted(pooled, key=lambda ref: -pooled[ref])[:3])
    hits = shared.search(query, limit=3, prefetch_limit=3)
    assert set(refs(hits)) == top3
    assert refs(hits) == [ref for ref, _ in expected if ref in top3]


def test_a_search_without_prefetch_sizes_its_first_stage_to_the_estimated_scope(
    shared: PageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[object, object]] = []
    execute = shared._execute  # type: ignore[attr-defined]

    def recording(operation: object) -> object:
        reply = execute(operation)
        sent.append((operation, reply))
        return reply

    monkeypatch.setattr(shared, "_execute", recording)
    scope = PageFilter(tenant="t1", acl_groups=G12)
    hits = shared.search(make_query(3), limit=5, page_filter=scope)
    (count, pages), (search, _) = sent
    assert isinstance(count, op.Count) and not count.exact  # an estimate: no scan of the scope
    assert 0 < pages <= shared.count_pages() and hits
    assert isinstance(search, op.Search) and count.where == search.plan.where
    assert search.plan.prefetch == prefetch_for(pages) == shared.search_depth(scope)
    assert refs(hits) == refs(shared.search(make_query(3), limit=5, page_filter=scope))
    sent.clear()
    shared.search(make_query(3), limit=5, prefetch_limit=7)
    assert [type(operation) for operation, _ in sent] == [op.Search]


def test_sparse_branch_finds_a_lexically_unique_page(
    open_backend: StoreFactory, request: pytest.FixtureRequest
) -> None:
    for backend in BACKENDS:
        store = open_backend(backend)
        for document in corpus():
            store.upsert_document(*document)
        schema, records, embeddings = make_document("delta.pdf", "d1", 2, seed=4, tenant="t3")
        unique = PageEmbedding(
            embeddings[1].multivector, embeddings[1].pooled, SparseVector((VOCAB + 7,), (1.0,))
        )
        store.upsert_document(schema, records, [embeddings[0], unique])
        query = make_query(5)
        query = PageEmbedding(query.multivector, query.pooled, SparseVector((VOCAB + 7,), (1.0,)))
        # dense candidates are cut to one page, the lexical branch still brings delta p2
        hits = store.search(query, limit=3, prefetch_limit=1)
        assert PageRef("delta.pdf", 2) in refs(hits), backend
        scoped = store.search(query, limit=3, prefetch_limit=1, page_filter=PageFilter(tenant="t1"))
        assert PageRef("delta.pdf", 2) not in refs(scoped), backend


def test_pages_without_lexical_vector_are_searchable(store: PageStore) -> None:
    store.upsert_document(*make_document("plain.pdf", "p1", 2, seed=7, sparse=False))
    hits = store.search(make_query(6), limit=30, prefetch_limit=30)
    assert {PageRef("plain.pdf", 1), PageRef("plain.pdf", 2)} <= set(refs(hits))


def test_get_pages_keeps_order_filters_and_skips_missing(shared: PageStore) -> None:
    wanted = [
        PageRef("gamma.pdf", 5),
        PageRef("alpha.pdf", 2),
        PageRef("alpha.pdf", 99),
        PageRef("nothere.pdf", 1),
        PageRef("beta.pdf", 1),
        PageRef("alpha.pdf", 2),
    ]
    assert [r.ref for r in shared.get_pages(wanted)] == [
        PageRef("gamma.pdf", 5),
        PageRef("alpha.pdf", 2),
        PageRef("beta.pdf", 1),
    ]
    only_t1 = shared.get_pages(wanted, PageFilter(tenant="t1", acl_groups=G12))
    assert [r.ref for r in only_t1] == [PageRef("alpha.pdf", 2), PageRef("beta.pdf", 1)]
    assert shared.get_pages(wanted, PageFilter(acl_groups=())) == []
    assert shared.get_pages([]) == []
    assert shared.get_pages(wanted)[0] == corpus_record(PageRef("gamma.pdf", 5))


def test_delete_document_removes_pages_and_schema(store: PageStore) -> None:
    assert not store.delete_document("beta.pdf")  # no such document without a tenant
    assert store.count_pages() == 15
    assert store.delete_document("beta.pdf", tenant="t1")
    assert store.count_pages() == 11
    assert store.document_version("beta.pdf", tenant="t1") is None
    assert store.get_schema("beta.pdf", tenant="t1") is None
    assert "beta.pdf" not in {h.ref.doc_id for h in store.search(make_query(7), limit=50)}
    assert not store.delete_document("never-stored.pdf")
    assert store.count_pages() == 11


async def test_asearch_matches_search(shared: PageStore) -> None:
    query = make_query(8)
    page_filter = PageFilter(tenant="t1", acl_groups=G12)
    expected = shared.search(query, limit=4, page_filter=page_filter)
    assert len(expected) == 4
    got = await shared.asearch(query, limit=4, page_filter=page_filter)
    assert [(h.ref, h.score) for h in got] == [(h.ref, h.score) for h in expected]
    assert await shared.asearch_depth(page_filter) == shared.search_depth(page_filter)


def test_closed_store_raises(open_backend: StoreFactory) -> None:
    for backend in BACKENDS:
        store = open_backend(backend)
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.count_pages()
        store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_settings_are_rejected(open_backend: StoreFactory, backend: str) -> None:
    with pytest.raises(StoreError, match="fusion='max'"):
        open_backend(backend, fusion="max")
    with pytest.raises(StoreError, match="idf_scope"):
        open_backend(backend, idf_scope="tenant")


# ---------------------------------------------------------------- the two backends agree


def assert_same_hits(edge: list[PageHit], client: list[PageHit], rtol: float = 1e-4) -> None:
    """Same scores in the same order; the same pages wherever the scores are not tied."""
    assert len(edge) == len(client)
    np.testing.assert_allclose([h.score for h in edge], [h.score for h in client], rtol=rtol)
    groups: dict[float, tuple[set[PageRef], set[PageRef]]] = {}
    for e, c in zip(edge, client, strict=True):
        key = round(e.score, 4)
        groups.setdefault(key, (set(), set()))
        groups[key][0].add(e.ref)
        groups[key][1].add(c.ref)
    last = round(edge[-1].score, 4) if edge else None
    for key, (edge_refs, client_refs) in groups.items():
        if key != last:  # a tie cut by the limit may keep different pages
            assert edge_refs == client_refs, key
    for e, c in zip(edge, client, strict=True):
        if e.ref == c.ref:
            assert e.record == c.record


@pytest.mark.parametrize("fusion", ["rrf", "dbsf"])
@pytest.mark.parametrize("idf_scope", ["filter", "collection"])
def test_backends_agree_on_search(open_backend: StoreFactory, fusion: str, idf_scope: str) -> None:
    edge = open_backend("edge", fusion=fusion, idf_scope=idf_scope)
    client = open_backend("client", fusion=fusion, idf_scope=idf_scope)
    for document in corpus():
        edge.upsert_document(*document)
        client.upsert_document(*document)
    filters = [
        None,
        PageFilter(tenant="t1", acl_groups=G12),
        PageFilter(doc_ids=("gamma.pdf",), tenant="t2", acl_groups=("g3",)),
        PageFilter(tenant="t1", acl_groups=("g1",)),
    ]
    for seed in range(4):
        for sparse in (False, True):
            query = make_query(seed, sparse=sparse)
            for page_filter in filters:
                for prefetch in (3, 50):
                    args = {"limit": 6, "page_filter": page_filter, "prefetch_limit": prefetch}
                    assert_same_hits(edge.search(query, **args), client.search(query, **args))


def test_backends_agree_on_documents_and_pages(open_backend: StoreFactory) -> None:
    edge, client = open_backend("edge"), open_backend("client")
    for store in (edge, client):
        for document in corpus():
            store.upsert_document(*document)
        store.upsert_document(*make_document("beta.pdf", "b2", 2, seed=8, tenant="t1", acl=("g2",)))
        store.delete_document("gamma.pdf", tenant="t2")
    everything = [PageRef(d, p) for d in ("alpha.pdf", "beta.pdf", "gamma.pdf") for p in range(7)]
    for page_filter in (
        None,
        PageFilter(tenant="t1", acl_groups=("g2",)),
        PageFilter(tenant="t2", acl_groups=("g1",)),
    ):
        assert edge.count_pages(page_filter) == client.count_pages(page_filter)
        assert edge.list_documents(page_filter) == client.list_documents(page_filter)
        assert edge.get_pages(everything, page_filter) == client.get_pages(everything, page_filter)


def test_an_uncommitted_version_is_invisible_and_recovered(store: PageStore) -> None:
    """Pages written before their commit (a crash mid-write) are never returned, by one request."""
    from llama_index_docmemo.store import operations as op
    from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT
    from llama_index_docmemo.store.points import document_points, journal_point

    schema, records, embeddings = make_document(
        "alpha.pdf", "a2", 6, seed=9, tenant="t1", acl=("g1",)
    )
    pages, record = document_points(
        schema, records, embeddings, dim=DIM, use_sparse=True, layout=DEFAULT_LAYOUT
    )
    rev = str(record.payload["revision"])
    execute = store._execute  # type: ignore[attr-defined]
    execute(op.Upsert([journal_point(record.id, rev, "t1")]))
    execute(op.Upsert(pages[:4]))  # the crash: some new pages, no commit
    scope = PageFilter(doc_ids=("alpha.pdf",), tenant="t1", acl_groups=("g1",))
    hits = store.search(make_query(2), limit=50, page_filter=scope)
    assert len(hits) == 6 and {h.record.doc_version for h in hits} == {"a1"}
    wanted = [PageRef("alpha.pdf", p) for p in range(1, 7)]
    assert {r.doc_version for r in store.get_pages(wanted, scope)} == {"a1"}
    assert store.count_pages(scope) == 6
    assert store.recover() == 1 and store.count_pages() == 15
    assert store.document_version("alpha.pdf", tenant="t1") == "a1"
    # a crash after the commit point: the record names a2, its pages are not yet released
    execute(op.Upsert([journal_point(record.id, rev, "t1")]))
    execute(op.Upsert(pages))
    execute(op.Upsert([record]))
    assert {
        h.record.doc_version for h in store.search(make_query(2), limit=50, page_filter=scope)
    } == {"a1"}
    assert store.recover() == 1 and store.recover() == 0
    assert {r.doc_version for r in store.get_pages(wanted, scope)} == {"a2"}
    assert store.count_pages(scope) == 6 and store.count_pages() == 15


def test_same_doc_id_in_two_tenants_is_two_documents(store: PageStore) -> None:
    store.upsert_document(*make_document("alpha.pdf", "z1", 2, seed=5, tenant="t2"))
    assert store.document_version("alpha.pdf", tenant="t1") == "a1"
    assert store.document_version("alpha.pdf", tenant="t2") == "z1"
    assert store.count_pages() == 17
    everything = store.search(make_query(3), limit=50)  # the owner's view: both, never fused
    assert len(everything) == 17
    assert sorted(h.record.tenant for h in everything if h.ref == PageRef("alpha.pdf", 1)) == [
        "t1",
        "t2",
    ]
    assert store.delete_document("alpha.pdf", tenant="t2")
    assert store.document_version("alpha.pdf", tenant="t1") == "a1" and store.count_pages() == 15
