"""Point ids and the identity values they are made of: deterministic, so re-ingesting a file
rewrites the same points.

Every id is a UUIDv5 of the point's identity; a retried write (a crashed worker, a retried Ray
task) overwrites instead of duplicating. A document is (tenant, doc id); its tenant and ACL are
stored as keyword values with a reserved value for "none" (:data:`NO_TENANT`, :data:`PUBLIC`),
so each access rule is one indexed match (:mod:`.scope` builds those conditions).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from llama_index_docmemo.errors import printable

NAMESPACE = uuid.UUID("6f1c2b9e-5d1a-4c07-9a8e-3b2f0d4e7a61")
NO_TENANT = "\x00no-tenant"
"""The stored tenant of a document indexed without one."""
PUBLIC = "\x00public"
"""The stored access of a document without an ACL."""
_MAX_NAME = 256
STORE_POINT_ID = str(uuid.uuid5(NAMESPACE, "docmemo-store"))
"""The store record: encoder, layout version, multivector layout."""


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


def revision(doc_version: str, acl: Sequence[str], metadata_digest: str = "") -> str:
    """What a document's pages are written as: its content, its access and the app's metadata
    (a change of either is a new revision, so pages never carry a mix of old and new)."""
    name = f"revision\x00{doc_version}\x00{access_values(acl)}"
    return str(uuid.uuid5(NAMESPACE, f"{name}\x00{metadata_digest}" if metadata_digest else name))


def page_point_id(doc_key: str, revision_id: str, page: int) -> str:
    """One point per (document, revision, page)."""
    return str(uuid.uuid5(NAMESPACE, f"page\x00{doc_key}\x00{revision_id}\x00{page}"))


def document_point_id(tenant: str | None, doc_id: str) -> str:
    """One document record per (tenant, doc id): the commit point of each new revision, and
    the document's identity (``doc_key``) on all its points; never the doc id alone."""
    return str(uuid.uuid5(NAMESPACE, f"document\x00{tenant_key(tenant)}\x00{doc_id}"))


def journal_point_id(doc_key: str) -> str:
    """The write-ahead note of a document being written or deleted (absent when at rest)."""
    return str(uuid.uuid5(NAMESPACE, f"journal\x00{doc_key}"))
