"""Pure store logic shared by both backends: ids, payloads, scopes, validation, operations."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema, Section
from llama_index_docmemo.store import operations, reads, scope
from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT, MULTI
from llama_index_docmemo.store.points import (
    ACCESS,
    DOC_KEY,
    FILE_NAME,
    KIND,
    KIND_DOCUMENT,
    KIND_PAGE,
    NO_TENANT,
    PAGE_FIELDS,
    PENDING,
    PUBLIC,
    REVISION,
    STORE_POINT_ID,
    TENANT_KEY,
    WRITE_STATE,
    StoreMeta,
    document_payload,
    document_point_id,
    document_points,
    file_name,
    journal_point_id,
    page_payload,
    page_point_id,
    revision,
    schema_from_payload,
)
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import (
    FieldGroup,
    FieldMatch,
    PageEmbedding,
    PageRecord,
    SparseVector,
)
from tests.legacy_layout import legacy_document_point_id

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
    a = page_point_id("d", "v1", 1)
    assert a == page_point_id("d", "v1", 1)
    others = {page_point_id("d", "v2", 1), page_point_id("d", "v1", 2)}
    others |= {
        page_point_id("e", "v1", 1),
        document_point_id(None, "d"),
        STORE_POINT_ID,
    }
    others |= {document_point_id("t1", "d"), document_point_id("t2", "d")}
    others |= {
        journal_point_id(document_point_id("t1", "d")),
        legacy_document_point_id("d"),
    }
    assert a not in others and len(others) == 9


def test_revision_changes_with_content_or_access_only() -> None:
    assert revision("v1", ["b", "a"]) == revision("v1", ["a", "b"])
    assert len({revision("v1", []), revision("v2", []), revision("v1", ["g"])}) == 3


def test_page_payload_round_trips_every_field_and_marks_kind() -> None:
    record = _record()
    payload = page_payload(record, revision(record.doc_version, record.acl))
    assert payload[KIND] == KIND_PAGE
    assert set(payload) == {
        *PAGE_FIELDS,
        KIND,
        FILE_NAME,
        REVISION,
        TENANT_KEY,
        ACCESS,
        DOC_KEY,
    }
    assert payload[DOC_KEY] == document_point_id("acme", "report.pdf")
    assert payload[ACCESS] == ["finance"] and payload[TENANT_KEY] == "acme"
    assert reads.record_from_payload(payload) == record
    public = page_payload(_record(tenant=None, acl=[]), "rev")
    assert public[ACCESS] == [PUBLIC]
    assert public[TENANT_KEY] == NO_TENANT


def test_schema_payload_round_trips_int_keyed_maps() -> None:
    schema = _schema(
        tenant="acme",
        acl=["g"],
        sections=[Section(title="Intro", start_page=1, end_page=2)],
        page_sections={1: "Intro", 2: "Intro"},
        page_summaries={3: "Totals"},
    )
    payload = document_payload(schema)
    assert payload[KIND] == KIND_DOCUMENT and payload["tenant"] == "acme"
    assert schema_from_payload(payload) == schema


def test_store_meta_check_names_both_encoders() -> None:
    wanted = StoreMeta("wordllama", 64, True)
    wanted.check(StoreMeta.from_payload(wanted.payload()), "here")
    with pytest.raises(StoreError, match=r"/tmp/s.*'colqwen'.*'wordllama'"):
        wanted.check(StoreMeta("colqwen", 128, False), "/tmp/s")


def test_scope_filter_translates_every_page_filter_field() -> None:
    where = FieldGroup("and", (FieldMatch("section", "eq", "Item 7"),))
    spec = scope.scope_filter(
        KIND_PAGE,
        PageFilter(doc_ids=("a", "b"), tenant="t", acl_groups=("g",), where=where),
        page=[1, 2],
    )
    assert spec == FieldGroup(
        "and",
        (
            FieldMatch(KIND, "eq", "page"),
            FieldMatch("doc_id", "in", ("a", "b")),
            FieldMatch(TENANT_KEY, "eq", "t"),
            FieldMatch(ACCESS, "in", (PUBLIC, "g")),
            FieldMatch("page", "in", (1, 2)),
            scope.COMMITTED,  # pages of an uncommitted revision are never read
            where,
        ),
    )
    assert scope.COMMITTED == FieldGroup("not", (FieldMatch(WRITE_STATE, "eq", PENDING),))
    records = scope.scope_filter(KIND_DOCUMENT, None)
    assert records == FieldGroup("and", (FieldMatch(KIND, "eq", "document"),))
    # deny by default: no tenant means untenanted documents, no groups means public ones
    assert scope.scope_filter(KIND_PAGE, PageFilter()).clauses == (
        FieldMatch(KIND, "eq", "page"),
        FieldMatch(TENANT_KEY, "eq", NO_TENANT),
        FieldMatch(ACCESS, "eq", PUBLIC),
        scope.COMMITTED,
    )


def test_file_name_is_the_basename_nodes_show() -> None:
    assert file_name("/data/reports/2023/10k.pdf", "2023/10k.pdf") == "10k.pdf"
    assert file_name("", "2023/10k.pdf") == "10k.pdf"
    assert file_name("C:\\reports\\10k.pdf", "10k.pdf") == "10k.pdf"
    page = page_payload(_record(source="/data/reports/2023/10k.pdf", doc_id="2023/10k.pdf"), "rev")
    assert page[FILE_NAME] == "10k.pdf" and page["doc_id"] == "2023/10k.pdf"
    record = document_payload(_schema(doc_id="2023/10k.pdf", source="/r/2023/10k.pdf"))
    assert record[FILE_NAME] == "10k.pdf" and record["source"] == "/r/2023/10k.pdf"


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
    assert (page_filter is not None and page_filter.matches_nothing) is empty


def test_document_points_builds_pages_and_schema_point() -> None:
    sparse = SparseVector((3, 1), (0.5, 2.0))
    pages, schema_point = document_points(
        _schema(),
        [_record(1), _record(2)],
        [_embedding(2, sparse=sparse), _embedding(3)],
        dim=DIM,
        use_sparse=True,
        layout=DEFAULT_LAYOUT,
    )
    key = document_point_id("acme", "report.pdf")
    rev = revision("abc123", ["finance"])
    assert [p.id for p in pages] == [page_point_id(key, rev, n) for n in (1, 2)]
    assert np.asarray(pages[1].dense[MULTI]).shape == (3, DIM)
    assert pages[0].sparse == sparse and pages[1].sparse is None
    assert schema_point.id == key and schema_point.dense == {}
    # written pending: the commit (record, then release) makes them visible
    assert {p.payload[WRITE_STATE] for p in pages} == {PENDING}
    assert WRITE_STATE not in schema_point.payload


def test_sparse_part_is_dropped_when_store_has_no_lexical_vector() -> None:
    pages, _ = document_points(
        _schema(),
        [_record()],
        [_embedding(sparse=SparseVector((1,), (1.0,)))],
        dim=DIM,
        use_sparse=False,
        layout=DEFAULT_LAYOUT,
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
        document_points(
            _schema(), records, embeddings, dim=DIM, use_sparse=True, layout=DEFAULT_LAYOUT
        )


@pytest.mark.parametrize(
    ("pages", "prefetch"),
    [(0, 200), (50, 200), (10_000, 200), (36_000, 200), (40_000, 210), (100_000, 300)]
    + [(300_000, 470), (1_000_000, 760)],
)
def test_prefetch_grows_with_the_pages_in_scope_from_the_default_floor(
    pages: int, prefetch: int
) -> None:
    assert operations.prefetch_for(pages) == prefetch


def test_prefetch_never_shrinks_as_the_scope_grows() -> None:
    depths = [operations.prefetch_for(pages) for pages in range(0, 2_000_001, 1_000)]
    assert depths == sorted(depths)


def test_search_plan_prefetch_defaults_and_limits() -> None:
    def plan(**kwargs: object) -> operations.SearchPlan:
        args: dict[str, object] = {
            "dim": DIM,
            "has_lexical": False,
            "limit": 5,
            "page_filter": None,
            "prefetch_limit": None,
            "fusion": "rrf",
            "idf_scope": "filter",
            "layout": DEFAULT_LAYOUT,
        }
        args.update(kwargs)
        return operations.search_plan(_embedding(), **args)  # type: ignore[arg-type]

    assert plan().prefetch == operations.DEFAULT_PREFETCH
    assert plan().with_depth(300).prefetch == 300
    assert plan(limit=500).with_depth(300).prefetch == 500
    assert plan(prefetch_limit=3).prefetch == 5  # never fewer candidates than results
    assert plan(prefetch_limit=50).prefetch == 50
    assert plan().where.clauses[0] == FieldMatch(KIND, "eq", "page")
    with pytest.raises(StoreError, match="limit must be at least 1"):
        plan(limit=0)
    with pytest.raises(StoreError, match="prefetch_limit"):
        plan(prefetch_limit=0)
    with pytest.raises(StoreError, match=r"query: pooled vector"):
        operations.search_plan(
            PageEmbedding(np.ones((1, DIM)), np.ones(DIM - 1)),
            dim=DIM,
            has_lexical=False,
            limit=1,
            page_filter=None,
            prefetch_limit=None,
            fusion="rrf",
            idf_scope="filter",
            layout=DEFAULT_LAYOUT,
        )
