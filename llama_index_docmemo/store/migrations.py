"""In-place upgrades of stores written by earlier versions, run when a store is opened.

Each step is idempotent: an interrupted migration runs again on the next open, and two
processes opening one server collection at once both finish it.
"""

from __future__ import annotations

from llama_index_docmemo.step_runtime import Steps
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store import scope
from llama_index_docmemo.store.points import (
    DOC_KEY,
    FILE_NAME,
    KIND,
    KIND_DOCUMENT,
    KIND_PAGE,
    PAYLOAD_INDEXES,
    REVISION,
    PointData,
    access_payload,
    document_payload,
    file_name,
    schema_from_payload,
    with_card,
)
from llama_index_docmemo.store.reads import record_from_payload
from llama_index_docmemo.store.scope import match
from llama_index_docmemo.types import FieldMatch


def migration_steps(send: op.Send, version: int, *, lexical: bool) -> Steps[int]:
    """Bring a store of layout ``version`` to the current one; returns documents migrated.
    ``lexical``: the store has lexical vectors (the cards get theirs).

    ``send``: the store's, each operation as its backend's call. The caller writes the new store
    record afterwards.
    """
    for key, kind, is_tenant in PAYLOAD_INDEXES:
        yield send(op.CreateIndex(key, kind, is_tenant))
    if version < 2:
        yield from _identity_fields(send)
    if version < 3:
        yield from _file_names(send)
    return (yield from _cards(send, lexical))


def _identity_fields(send: op.Send) -> Steps[None]:
    """Layout 1 (0.1.0): identity and access fields on every point.

    0.1.0 kept one document per bare doc id (file name), so each page belongs to the one record
    of its doc id; records move to their (tenant, doc id) point. Pages no record claims (left by
    a crash in 0.1.0) are deleted.
    """
    records = yield from op.scroll_all(send, scope.kind_filter(KIND_DOCUMENT))
    for payload in records:
        schema = schema_from_payload(payload)
        fields = document_payload(schema)
        page_fields = {k: fields[k] for k in (REVISION, *access_payload(None, "", []))}
        yield send(
            op.SetPayload(
                scope.kind_filter(
                    KIND_PAGE, doc_id=[schema.doc_id], doc_version=[schema.doc_version]
                ),
                page_fields,
            )
        )
        yield send(op.Upsert([PointData(fields[DOC_KEY], payload=fields)]))
        yield send(
            op.Delete(
                scope.everything(
                    match(KIND, (KIND_DOCUMENT,)),
                    match("doc_id", (schema.doc_id,)),
                    FieldMatch(DOC_KEY, "is_empty"),
                )
            )
        )
    yield send(
        op.Delete(scope.everything(match(KIND, (KIND_PAGE,)), FieldMatch(DOC_KEY, "is_empty")))
    )


def _file_names(send: op.Send) -> Steps[int]:
    """Layout 2: ``file_name`` (the basename, as nodes show it) on every page and record, and
    ``source`` on records, so ``MetadataFilter(key="file_name")`` matches what nodes show."""
    records = yield from op.scroll_all(send, scope.kind_filter(KIND_DOCUMENT))
    for payload in records:
        schema = schema_from_payload(payload)
        fields = document_payload(schema)
        doc_key = str(fields[DOC_KEY])
        yield send(op.Upsert([PointData(doc_key, payload=fields)]))
        yield send(
            op.SetPayload(
                scope.kind_filter(KIND_PAGE, **{DOC_KEY: [doc_key]}),
                {FILE_NAME: file_name(schema.source, schema.doc_id)},
            )
        )
    return len(records)


def _cards(send: op.Send, lexical: bool) -> Steps[int]:
    """Layout 3: a card on every document record (:mod:`.points`), made from its schema and its
    stored first page, as a write makes it. The record gets the card's BM25 vector (``lexical``)
    but not the first page's dense vectors, which a read of payloads cannot give: a migrated
    card is found by its words until the document is indexed again."""
    records = yield from op.scroll_all(send, scope.kind_filter(KIND_DOCUMENT))
    for payload in records:
        schema = schema_from_payload(payload)
        doc_key = str(payload[DOC_KEY])
        pages = yield from op.scroll_all(
            send,
            scope.kind_filter(
                KIND_PAGE, **{DOC_KEY: [doc_key], REVISION: [payload[REVISION]], "page": [1]}
            ),
        )
        first = [record_from_payload(p) for p in pages[:1]]
        record = PointData(doc_key, payload=payload)
        yield send(op.Upsert([with_card(record, schema, first, {}, lexical=lexical)]))
    return len(records)
