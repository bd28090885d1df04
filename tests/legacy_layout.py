"""What llama-index-docmemo 0.1.0 (store layout 1) wrote, for the tests that build such a store
and check that opening it migrates it."""

from __future__ import annotations

import uuid

from llama_index_docmemo.store.points import NAMESPACE


def legacy_document_point_id(doc_id: str) -> str:
    """Layout 1's point id: the doc id alone (today's ids add the tenant, ``ids.document_point_id``)."""
    return str(uuid.uuid5(NAMESPACE, f"document\x00{doc_id}"))
