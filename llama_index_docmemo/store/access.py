"""Who may see a stored document: tenant and ACL rules, as a pure predicate and as a Qdrant filter.

The one place where a :class:`PageFilter` becomes a store condition. Deny by default:

- ``tenant``: a caller sees only documents of its own tenant; a caller without a tenant sees only
  documents indexed without one. A query never spans tenants, so a document id (a path relative
  to the indexed root) names one document within the query.
- ``acl_groups``: a document indexed without an ACL is visible to every caller of its tenant; a
  document with an ACL only to callers holding at least one of its groups. No groups (None or an
  empty tuple) means: documents without an ACL only.

Both rules are stored as keyword fields with a reserved value for "none", so each is one
indexed match condition on every path (search, page fetch, schemas, counts).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from llama_index_docmemo.errors import printable
from llama_index_docmemo.types import FieldMatch, PageFilter

TENANT_KEY = "tenant_key"
"""Payload key: the tenant, or :data:`NO_TENANT`."""
ACCESS = "access"
"""Payload key: the document's ACL groups, or ``[PUBLIC]`` when it has none."""
DOC_KEY = "doc_key"
"""Payload key: the document's identity (tenant + doc id) as one keyword, shared by all its points."""

NO_TENANT = "\x00no-tenant"
PUBLIC = "\x00public"

NAMESPACE = uuid.UUID("6f1c2b9e-5d1a-4c07-9a8e-3b2f0d4e7a61")
_MAX_NAME = 256


def check_name(kind: str, value: str) -> str:
    """``value`` if it can name a tenant, ACL group or document id, else a ValueError naming it."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    check_utf8(kind, value)
    if len(value) > _MAX_NAME:
        raise ValueError(f"{kind} is longer than {_MAX_NAME} characters: {value[:40]!r}...")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{kind} contains control characters: {value!r}")
    return value


def check_utf8(kind: str, value: str) -> str:
    """``value`` if it is UTF-8 text, else a ValueError naming it: a file name read from disk may
    hold bytes that are not UTF-8 (as surrogates), which no point id or payload can hold."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{kind} is not valid UTF-8: '{printable(value)}'") from None
    return value


def tenant_key(tenant: str | None) -> str:
    """The stored tenant value: the tenant itself, or the reserved "no tenant" value."""
    return NO_TENANT if tenant is None else tenant


def access_values(acl: Sequence[str]) -> list[str]:
    """The stored access value: the document's groups, or the reserved "public" value."""
    return sorted(set(acl)) if acl else [PUBLIC]


def document_key(tenant: str | None, doc_id: str) -> str:
    """A document's identity as one string (a UUID): tenant and doc id, never the doc id alone."""
    return str(uuid.uuid5(NAMESPACE, f"document\x00{tenant_key(tenant)}\x00{doc_id}"))


def visible_groups(page_filter: PageFilter) -> tuple[str, ...]:
    """Access values a caller may see: public documents and those of its groups."""
    return (PUBLIC, *sorted(set(page_filter.acl_groups or ())))


def admits(page_filter: PageFilter | None, tenant: str | None, acl: Sequence[str]) -> bool:
    """Whether a caller with ``page_filter`` may see a document of ``tenant`` with ``acl``.

    ``None`` is the store owner's unrestricted view (maintenance, tests); every query path
    passes a :class:`PageFilter`.
    """
    if page_filter is None:
        return True
    if tenant_key(page_filter.tenant) != tenant_key(tenant):
        return False
    return not acl or bool(set(acl) & set(page_filter.acl_groups or ()))


def match(key: str, values: Sequence[str | int | bool]) -> FieldMatch:
    """``key`` equal to the one value, or to any of several."""
    return (
        FieldMatch(key, "eq", values[0])
        if len(values) == 1
        else FieldMatch(key, "in", tuple(values))
    )


def access_conditions(page_filter: PageFilter | None) -> list[FieldMatch]:
    """The conditions that :func:`admits` means, for a Qdrant filter (all must hold)."""
    if page_filter is None:
        return []
    conditions: list[FieldMatch] = []
    if page_filter.doc_ids is not None:
        conditions.append(match("doc_id", page_filter.doc_ids))
    conditions.append(match(TENANT_KEY, (tenant_key(page_filter.tenant),)))
    conditions.append(match(ACCESS, visible_groups(page_filter)))
    return conditions
