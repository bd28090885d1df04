"""The access rules (tenant, ACL: deny by default) of a scope's Qdrant conditions."""

from __future__ import annotations

import pytest

from llama_index_docmemo.store.points import (
    ACCESS,
    TENANT_KEY,
    access_values,
    check_name,
    document_point_id,
    tenant_key,
)
from llama_index_docmemo.store.scope import PageFilter

DOCS = [
    (None, []),
    (None, ["finance"]),
    ("acme", []),
    ("acme", ["finance"]),
    ("acme", ["hr", "board"]),
    ("globex", []),
]


def admitted_by_conditions(page_filter: PageFilter, tenant: str | None, acl: list[str]) -> bool:
    """What the scope's Qdrant conditions admit, evaluated in Python on the stored values."""
    stored = {
        TENANT_KEY: [tenant_key(tenant)],
        ACCESS: access_values(acl),
    }
    conditions = page_filter.conditions()
    assert all(c.op in ("eq", "in") for c in conditions)
    return all(
        set(stored[c.key]) & set(c.value if c.op == "in" else (c.value,))
        for c in conditions
        if c.key != "doc_id"
    )


@pytest.mark.parametrize(
    ("page_filter", "expected"),
    [
        (PageFilter(), {0}),
        (PageFilter(acl_groups=("finance",)), {0, 1}),
        (PageFilter(tenant="acme"), {2}),
        (PageFilter(tenant="acme", acl_groups=()), {2}),
        (PageFilter(tenant="acme", acl_groups=("finance",)), {2, 3}),
        (PageFilter(tenant="acme", acl_groups=("board", "x")), {2, 4}),
        (PageFilter(tenant="globex", acl_groups=("finance",)), {5}),
    ],
)
def test_the_conditions_are_deny_by_default(page_filter, expected) -> None:
    got = {i for i, doc in enumerate(DOCS) if admitted_by_conditions(page_filter, *doc)}
    assert got == expected


def test_identity_is_tenant_and_doc_id() -> None:
    keys = {document_point_id(t, d) for t in (None, "acme", "globex") for d in ("a.pdf", "b.pdf")}
    assert len(keys) == 6
    assert document_point_id("acme", "a.pdf") == document_point_id("acme", "a.pdf")


@pytest.mark.parametrize("bad", ["", "  ", "a\x00b", "tab\there", "x" * 300])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="tenant"):
        check_name("tenant", bad)


def test_a_name_that_is_not_utf8_is_refused_with_its_bytes_shown() -> None:
    with pytest.raises(ValueError, match=r"doc_id is not valid UTF-8: 'bad\\xff\.pdf'"):
        check_name("doc_id", "bad\udcff.pdf")  # os.fsdecode(b"bad\xff.pdf")
