"""Pure layout logic shared by both store backends: ids, payloads, filters, validation."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema, Section
from llama_index_docmemo.store import _layout as L
from llama_index_docmemo.store import access
from llama_index_docmemo.types import PageEmbedding, PageFilter, PageRecord, SparseVector

DIM = 4


def _record(page: int = 1, **changes: object) -> PageRecord:
    fields: dict[str, object] = {
        "doc_id": "report.pdf",
        "doc_version": "abc123",
        "page": page,
        "n_pages": 3,
        "text": "Revenue grew",
        "source": "/data/report.pdf",
        "section": "Results",
        "tenant": "acme",
        "acl": ["finance"],
        "width": 612.0,
        "height": 792.0,
        "ocr": True,
    }
    fields.update(changes)
    return PageRecord(**fields)  # type: ignore[arg-type]


def _embedding(rows: int = 2, dim: int = DIM, sparse: SparseVector | None = None) -> PageEmbedding:
    rng = np.random.default_rng(rows)
    return PageEmbedding(
        rng.normal(size=(rows, dim)).astype(np.float32),
        rng.normal(size=dim).astype(np.float32),
        sparse,
    )


def _schema(**changes: object) -> DocumentSchema:
    fields: dict[str, object] = {
        "doc_id": "report.pdf",
        "doc_version": "abc123",
        "n_pages": 3,
        "tenant": "acme",
        "acl": ["finance"],
    }
    fields.update(changes)
    return DocumentSchema(**fields)  # type: ignore[arg-type]


def test_point_ids_are_deterministic_and_distinct() -> None:
    a = L.page_point_id("d", "v1", 1)
    assert a == L.page_point_id("d", "v1", 1)
    others = {L.page_point_id("d", "v2", 1), L.page_point_id("d", "v1", 2)}
    others |= {L.page_point_id("e", "v1", 1), L.document_point_id(None, "d"), L.STORE_POINT_ID}
    others |= {L.document_point_id("t1", "d"), L.document_point_id("t2", "d")}
    others |= {L.journal_point_id(L.document_point_id("t1", "d")), L.legacy_document_point_id("d")}
    assert a not in others and len(others) == 9


def test_revision_changes_with_content_or_access_only() -> None:
    assert L.revision("v1", ["b", "a"]) == L.revision("v1", ["a", "b"])
    assert len({L.revision("v1", []), L.revision("v2", []), L.revision("v1", ["g"])}) == 3


def test_page_payload_round_trips_every_field_and_marks_kind() -> None:
    record = _record()
    payload = L.page_payload(record)
    assert payload[L.KIND] == L.KIND_PAGE
    assert set(payload) == {
        *L.PAGE_FIELDS,
        L.KIND,
        L.REVISION,
        access.TENANT_KEY,
        access.ACCESS,
        access.DOC_KEY,
    }
    assert payload[access.DOC_KEY] == L.document_point_id("acme", "report.pdf")
    assert payload[access.ACCESS] == ["finance"] and payload[access.TENANT_KEY] == "acme"
    assert L.record_from_payload(payload) == record
    public = L.page_payload(_record(tenant=None, acl=[]))
    assert public[access.ACCESS] == [access.PUBLIC]
    assert public[access.TENANT_KEY] == access.NO_TENANT


def test_schema_payload_round_trips_int_keyed_maps() -> None:
    schema = _schema(
        tenant="acme",
        acl=["g"],
        sections=[Section(title="Intro", start_page=1, end_page=2)],
        page_sections={1: "Intro", 2: "Intro"},
        page_summaries={3: "Totals"},
    )
    payload = L.document_payload(schema)
    assert payload[L.KIND] == L.KIND_DOCUMENT and payload["tenant"] == "acme"
    assert L.schema_from_payload(payload) == schema


def test_store_meta_check_names_both_encoders() -> None:
    wanted = L.StoreMeta("wordllama", 64, True)
    wanted.check(L.StoreMeta.from_payload(wanted.payload()), "here")
    with pytest.raises(StoreError, match=r"/tmp/s.*'colqwen'.*'wordllama'"):
        wanted.check(L.StoreMeta("colqwen", 128, False), "/tmp/s")


def test_scope_filter_translates_every_page_filter_field() -> None:
    spec = L.scope_filter(
        L.KIND_PAGE, PageFilter(doc_ids=("a", "b"), tenant="t", acl_groups=("g",)), page=[1, 2]
    )
    assert spec.must == (
        L.Condition(L.KIND, ("page",)),
        L.Condition("doc_id", ("a", "b")),
        L.Condition(access.TENANT_KEY, ("t",)),
        L.Condition(access.ACCESS, (access.PUBLIC, "g")),
        L.Condition("page", (1, 2)),
    )
    assert L.scope_filter(L.KIND_DOCUMENT, None).must == (L.Condition(L.KIND, ("document",)),)
    # deny by default: no tenant means untenanted documents, no groups means public ones
    assert L.scope_filter(L.KIND_PAGE, PageFilter()).must == (
        L.Condition(L.KIND, ("page",)),
        L.Condition(access.TENANT_KEY, (access.NO_TENANT,)),
        L.Condition(access.ACCESS, (access.PUBLIC,)),
    )


@pytest.mark.parametrize(
    ("page_filter", "empty"),
    [
        (None, False),
        (PageFilter(), False),
        (PageFilter(doc_ids=()), True),
        (PageFilter(acl_groups=()), False),
        (PageFilter(tenant=""), False),
    ],
)
def test_matches_nothing(page_filter: PageFilter | None, empty: bool) -> None:
    assert L.matches_nothing(page_filter) is empty


def test_document_points_builds_pages_and_schema_point() -> None:
    sparse = SparseVector((3, 1), (0.5, 2.0))
    pages, schema_point = L.document_points(
        _schema(),
        [_record(1), _record(2)],
        [_embedding(2, sparse=sparse), _embedding(3)],
        dim=DIM,
        use_sparse=True,
    )
    key = L.document_point_id("acme", "report.pdf")
    rev = L.revision("abc123", ["finance"])
    assert [p.id for p in pages] == [L.page_point_id(key, rev, n) for n in (1, 2)]
    assert np.asarray(pages[1].dense[L.MULTI]).shape == (3, DIM)
    assert pages[0].sparse == sparse and pages[1].sparse is None
    assert schema_point.id == key and schema_point.dense == {}


def test_sparse_part_is_dropped_when_store_has_no_lexical_vector() -> None:
    pages, _ = L.document_points(
        _schema(),
        [_record()],
        [_embedding(sparse=SparseVector((1,), (1.0,)))],
        dim=DIM,
        use_sparse=False,
    )
    assert pages[0].sparse is None


@pytest.mark.parametrize(
    ("records", "embeddings", "message"),
    [
        ([_record(2)], [_embedding(dim=5)], r"'report.pdf'.*page 2: multivector.*\(2, 5\)"),
        (
            [_record(2)],
            [PageEmbedding(np.ones((2, DIM)), np.ones(DIM + 1))],
            r"page 2: pooled vector.*\(5,\)",
        ),
        ([_record(1)], [PageEmbedding(np.ones(DIM), np.ones(DIM))], r"page 1: multivector"),
        ([_record(1)], [PageEmbedding(np.ones((0, DIM)), np.ones(DIM))], r"page 1: multivector"),
        (
            [_record(1)],
            [PageEmbedding(np.full((1, DIM), np.nan), np.ones(DIM))],
            r"page 1: multivector: contains NaN",
        ),
        ([_record(1), _record(1)], [_embedding(), _embedding()], r"page 1: page given twice"),
        ([_record(4)], [_embedding()], r"page 4: page number outside 1..3"),
        ([_record(1, doc_version="zzz")], [_embedding()], r"page 1: record belongs to"),
        ([_record(1, tenant="other")], [_embedding()], r"page 1: tenant or ACL differs"),
        ([_record(1, acl=[])], [_embedding()], r"page 1: tenant or ACL differs"),
        ([_record(1)], [], r"1 pages but 0 embeddings"),
        (
            [_record(3)],
            [_embedding(sparse=SparseVector((1, 1), (1.0, 2.0)))],
            r"page 3: sparse vector has repeated indices",
        ),
        (
            [_record(3)],
            [_embedding(sparse=SparseVector((1,), (1.0, 2.0)))],
            r"page 3: sparse vector has 1 indices but 2 values",
        ),
        (
            [_record(3)],
            [_embedding(sparse=SparseVector((-1,), (1.0,)))],
            r"page 3: sparse vector index outside",
        ),
    ],
)
def test_document_points_rejects_bad_input_naming_doc_and_page(
    records: list[PageRecord], embeddings: list[PageEmbedding], message: str
) -> None:
    with pytest.raises(StoreError, match=message):
        L.document_points(_schema(), records, embeddings, dim=DIM, use_sparse=True)


def test_search_plan_prefetch_defaults_and_limits() -> None:
    def plan(**kwargs: object) -> L.SearchPlan:
        args: dict[str, object] = {
            "dim": DIM,
            "has_lexical": False,
            "limit": 5,
            "page_filter": None,
            "prefetch_limit": None,
            "fusion": "rrf",
            "idf_scope": "filter",
        }
        args.update(kwargs)
        return L.search_plan(_embedding(), **args)  # type: ignore[arg-type]

    assert plan().prefetch == L.DEFAULT_PREFETCH
    assert plan(prefetch_limit=3).prefetch == 5  # never fewer candidates than results
    assert plan(prefetch_limit=50).prefetch == 50
    assert plan().where.must[0] == L.Condition(L.KIND, ("page",))
    with pytest.raises(StoreError, match="limit must be at least 1"):
        plan(limit=0)
    with pytest.raises(StoreError, match="prefetch_limit"):
        plan(prefetch_limit=0)
    with pytest.raises(StoreError, match=r"query: pooled vector"):
        L.search_plan(
            PageEmbedding(np.ones((1, DIM)), np.ones(DIM - 1)),
            dim=DIM,
            has_lexical=False,
            limit=1,
            page_filter=None,
            prefetch_limit=None,
            fusion="rrf",
            idf_scope="filter",
        )
