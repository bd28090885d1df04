"""MetadataFilters -> PageFilter -> Qdrant filters: translation rules and both backends agreeing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from test_store_backends import BACKENDS, corpus, make_document, make_query, open_store_on

from llama_index_docmemo.nodes import page_node
from llama_index_docmemo.store.scope import FilterError, PageFilter, to_page_filter
from llama_index_docmemo.types import FieldGroup, FieldMatch, PageRef


def mf(*filters: MetadataFilter | MetadataFilters, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=FilterCondition(condition))


def eq(key: str, value: object, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)  # type: ignore[arg-type]


def test_the_document_lifts_but_tenant_and_acl_stay_conditions() -> None:
    """A filter never sets who is asking: tenant and ACL stay conditions that can only narrow."""
    pf = to_page_filter(
        mf(
            eq("tenant", "t1"),
            eq("acl", ["g1", "g2"], FilterOperator.IN),
            eq("ref_doc_id", "a.pdf"),
        )
    )
    assert pf.doc_ids == ("a.pdf",) and pf.tenant is None and pf.acl_groups is None
    assert pf.where == FieldGroup(
        "and", (FieldMatch("tenant", "eq", "t1"), FieldMatch("acl", "in", ("g1", "g2")))
    )
    # file_name is the basename nodes show, not the document id: a payload condition
    by_name = to_page_filter(mf(eq("file_name", "a.pdf")))
    assert by_name.doc_ids is None
    assert by_name.where == FieldGroup("and", (FieldMatch("file_name", "eq", "a.pdf"),))


def test_other_keys_and_operators_go_into_where() -> None:
    pf = to_page_filter(mf(eq("page_label", "3", FilterOperator.GTE), eq("section", "Item 7")))
    assert pf.tenant is None and pf.doc_ids is None
    assert pf.where == FieldGroup(
        "and", (FieldMatch("page", "gte", 3), FieldMatch("section", "eq", "Item 7"))
    )
    either = to_page_filter(mf(eq("tenant", "t1"), eq("tenant", "t2"), condition="or"))
    assert either.tenant is None and either.where is not None
    assert either.where.clauses[0] == FieldGroup(
        "or", (FieldMatch("tenant", "eq", "t1"), FieldMatch("tenant", "eq", "t2"))
    )
    all_of = to_page_filter(mf(eq("acl", ["g1", "g3"], FilterOperator.ALL)))
    assert all_of.where == FieldGroup(
        "and", (FieldGroup("and", (FieldMatch("acl", "eq", "g1"), FieldMatch("acl", "eq", "g3"))),)
    )


def test_a_page_filter_passes_through_and_none_is_everything() -> None:
    pf = PageFilter(tenant="x")
    assert to_page_filter(pf) is pf
    assert to_page_filter(None) == PageFilter()


@pytest.mark.parametrize(
    "filters, message",
    [
        (mf(eq("text", "margin", FilterOperator.TEXT_MATCH)), "'text_match' cannot be translated"),
        (mf(eq("text", "m", FilterOperator.TEXT_MATCH_INSENSITIVE)), "cannot be translated"),
        (mf(eq("section", "a", FilterOperator.LT)), "'section'.*needs a number"),
        (mf(eq("page_label", "iv")), "'iv' is not a page number"),
        (MetadataFilters(filters=[]), "without any filter"),
    ],
)
def test_untranslatable_filters_name_key_and_operator(filters, message) -> None:
    with pytest.raises(FilterError, match=message):
        to_page_filter(filters)


def test_a_wrong_scope_type_is_refused() -> None:
    with pytest.raises(FilterError, match="PageFilter or MetadataFilters"):
        to_page_filter({"tenant": "t1"})  # type: ignore[arg-type]


G = ("g1", "g2", "g3")
CASES = {
    "page range": (
        mf(eq("page", 2, FilterOperator.GT), eq("page", 4, FilterOperator.LTE)),
        lambda d, p: 2 < p <= 4,
    ),
    "section": (mf(eq("section", "Section 1")), lambda d, p: p <= 2),
    "not equal": (
        mf(eq("file_name", "alpha.pdf", FilterOperator.NE)),
        lambda d, p: d != "alpha.pdf",
    ),
    "nin": (
        mf(eq("doc_id", ["alpha.pdf", "beta.pdf"], FilterOperator.NIN)),
        lambda d, p: d == "gamma.pdf",
    ),
    "or across keys": (
        mf(eq("tenant", "t2"), eq("page", 1), condition="or"),
        lambda d, p: d == "gamma.pdf" or p == 1,
    ),
    "nested": (
        mf(mf(eq("tenant", "t1")), eq("page", 6, FilterOperator.LT)),
        lambda d, p: d != "gamma.pdf" and p < 6,
    ),
    "negated group": (
        mf(eq("tenant", "t1"), eq("page", 3), condition="not"),
        lambda d, p: d == "gamma.pdf" and p != 3,
    ),
    "acl contains": (mf(eq("acl", "g3", FilterOperator.CONTAINS)), lambda d, p: d == "gamma.pdf"),
    "file path": (mf(eq("file_path", "/docs/beta.pdf")), lambda d, p: d == "beta.pdf"),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_backends_evaluate_translated_filters_alike(backend: str, tmp_path: Path) -> None:
    store = open_store_on(backend, tmp_path / "store")
    try:
        for schema, records, embeddings in corpus():
            store.upsert_document(schema, records, embeddings)
        every = {(r.doc_id, r.page) for _, records, _ in corpus() for r in records}
        for name, (filters, allowed) in CASES.items():
            lifted = to_page_filter(filters)
            expected = {(d, p) for d, p in every if allowed(d, p)}
            # one caller per tenant holding every group (a query never spans tenants)
            callers = {
                replace(lifted, tenant=lifted.tenant or t, acl_groups=lifted.acl_groups or G)
                for t in ("t1", "t2")
            }
            assert sum(store.count_pages(pf) for pf in callers) == len(expected), name
            got = {
                (r.doc_id, r.page)
                for pf in callers
                for r in store.get_pages([PageRef(d, p) for d, p in sorted(every)], pf)
            }
            assert got == expected, name
    finally:
        store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_file_name_matches_the_basename_nodes_show_in_every_folder(
    backend: str, tmp_path: Path
) -> None:
    """``reports/2023/10k.pdf`` and ``reports/2024/10k.pdf``: one file name, two documents."""
    store = open_store_on(backend, tmp_path / "store")
    try:
        for seed, doc_id in enumerate(("2023/10k.pdf", "2024/10k.pdf", "2024/notes.pdf")):
            store.upsert_document(*make_document(doc_id, "v1", 3, seed=seed, tenant="t1"))

        def caller(*filters: MetadataFilter) -> PageFilter:
            return replace(to_page_filter(mf(*filters)), tenant="t1")

        by_name = caller(eq("file_name", "10k.pdf"))
        hits = store.search(make_query(1), limit=10, page_filter=by_name)
        assert {h.record.doc_id for h in hits} == {"2023/10k.pdf", "2024/10k.pdf"}
        assert len(hits) == 6 and store.count_pages(by_name) == 6
        assert {page_node(h.record).metadata["file_name"] for h in hits} == {"10k.pdf"}
        assert [s.doc_id for s in store.list_documents(by_name)] == ["2023/10k.pdf", "2024/10k.pdf"]
        for key in ("doc_id", "ref_doc_id", "document_id"):
            one = caller(eq(key, "2024/10k.pdf"))
            assert {
                h.record.doc_id for h in store.search(make_query(2), limit=10, page_filter=one)
            } == {"2024/10k.pdf"}, key
        by_path = caller(eq("file_path", "/docs/2023/10k.pdf"))
        assert store.count_pages(by_path) == 3
        assert [s.doc_id for s in store.list_documents(by_path)] == ["2023/10k.pdf"]
        assert store.count_pages(caller(eq("file_name", "2023/10k.pdf"))) == 0  # not an id
    finally:
        store.close()
