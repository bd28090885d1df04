"""Point ids: deterministic UUIDs, so re-ingesting a file rewrites the same points.

Every id is a UUIDv5 of the point's identity; a retried write (a crashed worker, a retried Ray
task) overwrites instead of duplicating.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from llama_index_docmemo.store import access

NAMESPACE = access.NAMESPACE
STORE_POINT_ID = str(uuid.uuid5(NAMESPACE, "docmemo-store"))
"""The store record: encoder, layout version, multivector layout."""


def revision(doc_version: str, acl: Sequence[str], metadata_digest: str = "") -> str:
    """What a document's pages are written as: its content, its access and the app's metadata
    (a change of either is a new revision, so pages never carry a mix of old and new)."""
    name = f"revision\x00{doc_version}\x00{access.access_values(acl)}"
    return str(uuid.uuid5(NAMESPACE, f"{name}\x00{metadata_digest}" if metadata_digest else name))


def page_point_id(doc_key: str, revision_id: str, page: int) -> str:
    """One point per (document, revision, page)."""
    return str(uuid.uuid5(NAMESPACE, f"page\x00{doc_key}\x00{revision_id}\x00{page}"))


def document_point_id(tenant: str | None, doc_id: str) -> str:
    """One document record per (tenant, doc id): the commit point of each new revision."""
    return access.document_key(tenant, doc_id)


def journal_point_id(doc_key: str) -> str:
    """The write-ahead note of a document being written or deleted (absent when at rest)."""
    return str(uuid.uuid5(NAMESPACE, f"journal\x00{doc_key}"))


def legacy_document_point_id(doc_id: str) -> str:
    """Layout 1's record id (doc id alone), read only to migrate a 0.1.0 store."""
    return str(uuid.uuid5(NAMESPACE, f"document\x00{doc_id}"))
