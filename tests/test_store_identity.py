"""Identity is fixed at construction and every scope only narrows it (``store/identity.py``).

The rules on plain data first; then, on both backends, a property: no random filter tree
(AND / OR / NOT, IN / NIN / NE, nested, on the identity keys and any other) and no random
``PageFilter`` given to ``DocMemoIndex.scope`` widens what a caller can read. A request either is
refused or reads a subset of the caller's pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from test_store_backends import BACKENDS, make_document, open_store_on

from llama_index_docmemo import DocMemoIndex
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.scope import FilterError, IdentityError, PageFilter, caller
from llama_index_docmemo.types import FieldGroup, FieldMatch, PageRef

A = PageFilter(tenant="t1", acl_groups=("g1",))


def mf(*filters: MetadataFilter | MetadataFilters, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=FilterCondition(condition))


def eq(key: str, value: object, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the rule on plain data


@pytest.mark.parametrize(
    "request_",
    [
        PageFilter(tenant="t2"),
        PageFilter(acl_groups=("g2",)),
        PageFilter(tenant="t1", acl_groups=("g1", "g2")),
        mf(eq("tenant", "t2")),
        mf(eq("tenant", ["t1", "t2"], FilterOperator.IN)),
        mf(eq("tenant", "t2"), eq("acl", "g2")),
        mf(eq("acl", "g2")),
        mf(eq("acl_groups", ["g1", "g3"], FilterOperator.ANY)),
        mf(eq("acl", "g3", FilterOperator.CONTAINS)),
        mf(eq("tenant_key", "t2")),
        mf(eq("access", "g2")),
        mf(eq("page", 1), eq("tenant", "t2"), condition="or"),
        mf(mf(eq("page", 1), mf(eq("tenant", "t2")), condition="or")),
        mf(eq("tenant", "t2", FilterOperator.NE), condition="not"),  # not (tenant != t2)
        mf(eq("tenant", ["t2"], FilterOperator.NIN), condition="not"),
        mf(eq("tenant", "\x00no-tenant")),
        mf(eq("access", "\x00public")),
        mf(eq("section", "\x00anything")),
        PageFilter(tenant="\x00no-tenant"),
    ],
)
def test_a_scope_naming_another_identity_is_refused(request_) -> None:
    with pytest.raises(IdentityError, match="identity is set|reserved|control characters"):
        A.narrow(request_)


def test_the_message_says_who_is_asking_and_where_identity_is_set() -> None:
    with pytest.raises(IdentityError) as raised:
        A.narrow(mf(eq("tenant", "t2")))
    message = str(raised.value)
    assert "'t2'" in message and "tenant 't1'" in message and "'g1'" in message
    assert "DocMemoIndex(..., tenant=, acl=)" in message
    with pytest.raises(IdentityError, match="the caller has no tenant and no ACL groups"):
        PageFilter().narrow(PageFilter(tenant="t1"))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (None, A),
        (PageFilter(), A),
        (PageFilter(tenant="t1"), A),
        (PageFilter(acl_groups=()), PageFilter(tenant="t1", acl_groups=())),
        (PageFilter(doc_ids=("x.pdf",)), PageFilter(("x.pdf",), "t1", ("g1",))),
        (
            mf(eq("tenant", "t1"), eq("acl", "g1")),
            PageFilter(
                tenant="t1",
                acl_groups=("g1",),
                where=FieldGroup(
                    "and", (FieldMatch("tenant", "eq", "t1"), FieldMatch("acl", "eq", "g1"))
                ),
            ),
        ),
        (
            mf(eq("tenant", "t2", FilterOperator.NE)),
            PageFilter(
                tenant="t1",
                acl_groups=("g1",),
                where=FieldGroup("and", (FieldMatch("tenant", "ne", "t2"),)),
            ),
        ),
        (
            mf(eq("tenant", "t2"), condition="not"),  # excluding another tenant only narrows
            PageFilter(
                tenant="t1",
                acl_groups=("g1",),
                where=FieldGroup("and", (FieldGroup("not", (FieldMatch("tenant", "eq", "t2"),)),)),
            ),
        ),
    ],
)
def test_scopes_within_the_caller_narrow_it(request_, expected: PageFilter) -> None:
    assert A.narrow(request_) == expected


def test_document_ids_intersect_and_conditions_join() -> None:
    engine = PageFilter(doc_ids=("a.pdf", "b.pdf"), tenant="t1", where=FieldGroup("and", ()))
    scope = engine.narrow(mf(eq("doc_id", ["b.pdf", "c.pdf"], FilterOperator.IN), eq("page", 2)))
    assert scope.doc_ids == ("b.pdf",) and scope.tenant == "t1"
    assert scope.where == FieldGroup(
        "and", (FieldGroup("and", ()), FieldGroup("and", (FieldMatch("page", "eq", 2),)))
    )
    assert engine.narrow(PageFilter(doc_ids=("c.pdf",))).doc_ids == ()  # matches nothing


@pytest.mark.parametrize(
    "built",
    [
        PageFilter(tenant="\x00no-tenant"),
        PageFilter(tenant="a\nb"),
        PageFilter(tenant=""),
        PageFilter(tenant="t1", acl_groups=("\x00public",)),
        mf(eq("tenant", "t1")),  # MetadataFilters never set the caller
    ],
)
def test_construction_refuses_reserved_names_and_identity_from_filters(built) -> None:
    with pytest.raises(IdentityError):
        caller(built)


def test_an_index_refuses_reserved_tenants_and_groups(tmp_path: Path) -> None:
    store = open_store_on("edge", tmp_path / "store")
    try:
        encoder = _Unused()
        for kwargs in ({"tenant": "\x00no-tenant"}, {"tenant": "t1", "acl": ["\x00public"]}):
            with pytest.raises(IdentityError):
                DocMemoIndex.from_store(store, encoder, **kwargs)
    finally:
        store.close()


class _Unused(PageEncoder):
    """The test store's encoder name, never asked to encode."""

    name = "test-encoder"
    dim = 16

    def encode_pages(self, pages):  # pragma: no cover - never called
        raise AssertionError

    def encode_queries(self, queries):  # pragma: no cover - never called
        raise AssertionError


# ---------------------------------------------------------------- the property, on both backends

DOCS = [  # (doc id, tenant, acl, pages): same names in several tenants, public and protected
    ("report.pdf", "t1", (), 3),
    ("memo.pdf", "t1", ("g1",), 2),
    ("plan.pdf", "t1", ("g2",), 2),
    ("report.pdf", "t2", (), 3),
    ("memo.pdf", "t2", ("g2",), 2),
    ("report.pdf", None, (), 2),
]
EVERY = sorted({PageRef(d, p) for d, _, _, n in DOCS for p in range(1, n + 1)})
CALLERS = {
    "t1, no groups": PageFilter(tenant="t1"),
    "t1, g1": PageFilter(tenant="t1", acl_groups=("g1",)),
    "no tenant": PageFilter(),
}


@pytest.fixture(scope="module", params=BACKENDS)
def owned(request, tmp_path_factory) -> Iterator[PageStore]:
    store = open_store_on(request.param, tmp_path_factory.mktemp("identity") / "store")
    for seed, (doc_id, tenant, acl, n_pages) in enumerate(DOCS):
        document = make_document(doc_id, "v1", n_pages, seed=seed, tenant=tenant, acl=acl)
        store.upsert_document(*document)
    yield store
    store.close()


def readable(store: PageStore, scope: PageFilter) -> set[tuple[str | None, str, int]]:
    """(tenant, document, page) of every page ``scope`` reads by page fetch, and (tenant,
    document, 0) of every document it lists."""
    pages = {(r.tenant, r.doc_id, r.page) for r in store.get_pages(EVERY, scope)}
    assert store.count_pages(scope) == len(pages)
    return pages | {(s.tenant, s.doc_id, 0) for s in store.list_documents(scope)}


KEYS = ["tenant", "acl", "acl_group", "tenant_key", "access", "doc_id", "file_name", "page"]
VALUES = {
    "tenant": ["t1", "t2", "t9", "\x00no-tenant"],
    "tenant_key": ["t1", "t2", "\x00no-tenant"],
    "acl": ["g1", "g2", "g3"],
    "acl_group": ["g1", "g2"],
    "access": ["g1", "g2", "\x00public"],
    "doc_id": ["report.pdf", "memo.pdf", "plan.pdf"],
    "file_name": ["report.pdf", "memo.pdf"],
    "page": [1, 2, 3],
}
OPERATORS = [FilterOperator.EQ, FilterOperator.NE, FilterOperator.IN, FilterOperator.NIN]


@st.composite
def leaves(draw) -> MetadataFilter:
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(OPERATORS))
    pool = VALUES[key]
    if op in (FilterOperator.IN, FilterOperator.NIN):
        value: object = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    else:
        value = draw(st.sampled_from(pool))
    return eq(key, value, op)


trees = st.recursive(
    leaves(),
    lambda children: st.builds(
        lambda filters, condition: mf(*filters, condition=condition),
        st.lists(children, min_size=1, max_size=3),
        st.sampled_from(["and", "or", "not"]),
    ),
    max_leaves=6,
).map(lambda tree: tree if isinstance(tree, MetadataFilters) else mf(tree))

page_filters = st.builds(
    PageFilter,
    doc_ids=st.none() | st.lists(st.sampled_from(VALUES["doc_id"]), max_size=2).map(tuple),
    tenant=st.none() | st.sampled_from(["t1", "t2"]),
    acl_groups=st.none() | st.lists(st.sampled_from(["g1", "g2"]), max_size=2).map(tuple),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(who=st.sampled_from(sorted(CALLERS)), request_=trees | page_filters)
def test_no_filter_tree_or_page_filter_widens_the_caller(owned: PageStore, who, request_) -> None:
    identity = CALLERS[who]
    index = DocMemoIndex.from_store(
        owned, _Unused(), tenant=identity.tenant, acl=identity.acl_groups
    )
    allowed = readable(owned, index.scope())
    try:
        scope = index.scope(request_)
    except FilterError:  # refused (IdentityError), or untranslatable
        return
    assert readable(owned, scope) <= allowed
