"""The access rules (tenant, ACL: deny by default) as a pure predicate, and its filter agrees."""

from __future__ import annotations

import pytest

from llama_index_docmemo.store import access
from llama_index_docmemo.types import PageFilter

DOCS = [
    (None, []),
    (None, ["finance"]),
    ("acme", []),
    ("acme", ["finance"]),
    ("acme", ["hr", "board"]),
    ("globex", []),
]


def admitted_by_conditions(page_filter: PageFilter, tenant: str | None, acl: list[str]) -> bool:
    """What the Qdrant filter built from ``access_conditions`` admits, evaluated in Python."""
    stored = {
        access.TENANT_KEY: [access.tenant_key(tenant)],
        access.ACCESS: access.access_values(acl),
    }
    conditions = access.access_conditions(page_filter)
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
        (None, set(range(len(DOCS)))),
    ],
)
def test_admits_is_deny_by_default_and_the_filter_agrees(page_filter, expected) -> None:
    got = {i for i, (tenant, acl) in enumerate(DOCS) if access.admits(page_filter, tenant, acl)}
    assert got == expected
    if page_filter is not None:
        assert {
            i for i, doc in enumerate(DOCS) if admitted_by_conditions(page_filter, *doc)
        } == expected


def test_identity_is_tenant_and_doc_id() -> None:
    keys = {access.document_key(t, d) for t in (None, "acme", "globex") for d in ("a.pdf", "b.pdf")}
    assert len(keys) == 6
    assert access.document_key("acme", "a.pdf") == access.document_key("acme", "a.pdf")


@pytest.mark.parametrize("bad", ["", "  ", "a\x00b", "tab\there", "x" * 300])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="tenant"):
        access.check_name("tenant", bad)


def test_a_name_that_is_not_utf8_is_refused_with_its_bytes_shown() -> None:
    with pytest.raises(ValueError, match=r"doc_id is not valid UTF-8: 'bad\\xff\.pdf'"):
        access.check_name("doc_id", "bad\udcff.pdf")  # os.fsdecode(b"bad\xff.pdf")
