"""Document cards in the store: written with a document's record, listed and searched in Qdrant.

A card (:mod:`llama_index_docmemo.levers.document_stage`: file name, title and the app's
metadata as its head; outline, first pages' summaries and first page as its body) is made once,
when the document is written, and kept on the document's record point (``kind=document``), so a
question over a whole collection reads the cards of its candidate documents in the same request
as their schemas, and can search the cards themselves:

- the payload key :data:`CARD` holds the card's match keys (``head`` and ``body``);
- the record point carries the first page's dense vectors (the card's body is mostly its first
  page; a cover names a filing's company, form and year) and, in a store with lexical vectors,
  the card text's BM25 vector (:class:`~llama_index_docmemo.encoders.lexical.Bm25Lexical`,
  Qdrant's own BM25, as the package's lexical encoders write pages), so a card search is the
  page search's plan over ``kind=document`` points: dense and lexical branches, fused alike.

The record carries the document's tenant, ACL, revision and version like its pages; a card is
read or searched through :func:`~.scope.scope_filter` like every page, replaced with the record
when a new version commits and deleted with it. Page reads select ``kind=page`` and never see it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.encoders.lexical import Bm25Lexical
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.levers.document_stage import DocumentCard, card_fields, make_card
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.operations import SearchPlan
from llama_index_docmemo.store.payloads import KIND_DOCUMENT, PointData, schema_from_payload
from llama_index_docmemo.store.scope import PageFilter, scope_filter
from llama_index_docmemo.types import PageRecord, SparseVector

if TYPE_CHECKING:
    import numpy as np

CARD = "card"
"""The record's payload key holding the card: ``{"head": [keys], "body": [keys]}``."""

CARD_FIELDS = ("schema", CARD)
"""What a card read fetches of a record (the card and its schema, nothing else)."""


@dataclass(frozen=True)
class StoredCard:
    """A document as the document stage reads it: its schema (the version the card is of) and
    its card."""

    schema: DocumentSchema
    card: DocumentCard


@lru_cache(maxsize=1)
def _bm25() -> Bm25Lexical:
    return Bm25Lexical()


def card_text(schema: DocumentSchema, pages: Sequence[PageRecord]) -> tuple[str, str]:
    """The card's (head, body) text of a document being written: the app's metadata and the
    first page from its pages (page 1, else its first page)."""
    first = min(pages, key=lambda p: p.page, default=None)
    metadata: Mapping[str, object] | None = first.metadata if first is not None else None
    text = first.text if first is not None and first.page == 1 else ""
    return card_fields(schema, text, metadata)


def built_card(schema: DocumentSchema, pages: Sequence[PageRecord]) -> StoredCard:
    """The card of a document made from its schema and pages, as a write stores it (a store
    that keeps no cards makes them so when asked)."""
    return StoredCard(schema, make_card(schema.doc_id, *card_text(schema, pages)))


def card_payload(card: DocumentCard) -> dict[str, list[str]]:
    """The card's match keys as stored under :data:`CARD` (sorted: one payload per card)."""
    return {"head": sorted(card.head), "body": sorted(card.body)}


def card_sparse(schema: DocumentSchema, pages: Sequence[PageRecord]) -> SparseVector | None:
    """The card text's BM25 vector (None for a card without words)."""
    head, body = card_text(schema, pages)
    vector = _bm25().embed_page(f"{head}\n{body}")
    return vector if vector.indices else None


def first_page_vectors(
    pages: Sequence[PageRecord], page_points: Sequence[PointData]
) -> dict[str, np.ndarray]:
    """The dense vectors of page 1 among a document's page points (none without a page 1)."""
    for page, point in zip(pages, page_points, strict=True):
        if page.page == 1:
            return dict(point.dense)
    return {}


def with_card(
    record: PointData,
    schema: DocumentSchema,
    pages: Sequence[PageRecord],
    dense: Mapping[str, np.ndarray],
    *,
    lexical: bool,
) -> PointData:
    """The document's record point carrying its card: the card's keys in the payload, the
    ``dense`` vectors (the first page's: :func:`first_page_vectors`) and, ``lexical`` (the
    store has lexical vectors), the card text's BM25 vector."""
    return replace(
        record,
        dense=dict(dense),
        sparse=card_sparse(schema, pages) if lexical else None,
        payload={**record.payload, CARD: card_payload(built_card(schema, pages).card)},
    )


def card_from_payload(payload: Mapping[str, Any]) -> StoredCard:
    """The stored card of a record's payload (with :data:`CARD_FIELDS` at least)."""
    schema = schema_from_payload(dict(payload))
    card = payload.get(CARD)
    if not isinstance(card, Mapping):
        raise StoreError(
            f"document {schema.doc_id!r} has no card: the store was not migrated (open it once "
            "with this version of llama-index-docmemo, which adds the cards)"
        )
    head = frozenset(str(k) for k in card.get("head") or ())
    body = frozenset(str(k) for k in card.get("body") or ())
    return StoredCard(schema, DocumentCard(schema.doc_id, head, body))


def card_plan(plan: SearchPlan, page_filter: PageFilter | None) -> SearchPlan:
    """A page search's plan turned to the cards of the documents ``page_filter`` admits (the
    lexical IDF, when scoped by the filter, is then over those cards)."""
    return replace(plan, where=scope_filter(KIND_DOCUMENT, page_filter))
