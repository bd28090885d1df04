"""What the store writes: each point's id, its payload, the checks on what it is given, and a
document record's card. Pure functions over plain data (both backends store exactly these
points, so a store written through one backend is read back identically by the other).

**Ids.** Every id is a UUIDv5 of the point's identity, so re-ingesting a file rewrites the same
points and a retried write (a crashed worker, a retried Ray task) overwrites instead of
duplicating. A document is (tenant, doc id); its tenant and ACL are stored as keyword values
with a reserved value for "none" (:data:`NO_TENANT`, :data:`PUBLIC`), so each access rule is one
indexed match (:mod:`.scope` builds those conditions).

**Payloads.** Page, document, journal and store payloads, and the payload indexes.

**Checks.** A bad embedding or record raises a :class:`StoreError` naming the document and page
(for a document to write, a :class:`DocumentRejectedError`: that document fails, the store is
fine), before anything is written or sent; a good document becomes its page points and record
point here, in the store's multivector layout.

**Cards.** A document's card (:mod:`llama_index_docmemo.levers.document_stage`: file name, title
and the app's metadata as its head; outline, first pages' summaries and first page as its body)
is made once, when the document is written, and kept on the document's record point
(``kind=document``), so a question over a whole collection reads the cards of its candidate
documents in the same request as their schemas, and can search the cards themselves:

- the payload key :data:`CARD` holds the card's match keys (``head`` and ``body``);
- the record point carries the first page's dense vectors (the card's body is mostly its first
  page; a cover names a filing's company, form and year) and, in a store with lexical vectors,
  the card text's BM25 vector (:class:`~llama_index_docmemo.encoders.base.Bm25Lexical`,
  Qdrant's own BM25, as the package's lexical encoders write pages), so a card search is the
  page search's plan over ``kind=document`` points: dense and lexical branches, fused alike.

The record carries the document's tenant, ACL, revision and version like its pages; a card is
read or searched through :func:`~.scope.scope_filter` like every page, replaced with the record
when a new version commits and deleted with it. Page reads select ``kind=page`` and never see it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Literal

import numpy as np

from llama_index_docmemo.encoders.base import Bm25Lexical
from llama_index_docmemo.errors import DocumentRejectedError, StoreError, printable
from llama_index_docmemo.levers.document_stage import DocumentCard, card_fields, make_card
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.layouts import LEGACY, MULTI, MultivectorLayout
from llama_index_docmemo.types import (
    PageEmbedding,
    PageRecord,
    SparseVector,
    StoredVectors,
)

# -- ids ----------------------------------------------------------------------------------------

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


# -- payloads -----------------------------------------------------------------------------------

KIND = "kind"
KIND_PAGE = "page"
KIND_DOCUMENT = "document"
KIND_STORE = "store"
KIND_JOURNAL = "journal"
REVISION = "revision"
FILE_NAME = "file_name"
"""The file's base name, as LlamaIndex nodes show it (``reports/2023/10k.pdf`` -> ``10k.pdf``)."""
WRITE_STATE = "write_state"
"""``"pending"`` on the pages of a revision not yet committed (absent once committed): every read
filters them out inside Qdrant, so a search is one request (no journal look-up). A keyword, not
a bool: Qdrant Edge 0.9 does not match Python booleans."""
PENDING = "pending"
USER = "meta"
"""The user's metadata (a JSON object; see :mod:`.metadata`)."""
TENANT_KEY = "tenant_key"
"""The tenant, or :data:`NO_TENANT` (:func:`tenant_key`)."""
ACCESS = "access"
"""The document's ACL groups, or ``[PUBLIC]`` when it has none (:func:`access_values`)."""
DOC_KEY = "doc_key"
"""The document's identity (tenant + doc id) as one keyword, shared by all its points."""

LAYOUT_VERSION = 4
"""1: llama-index-docmemo 0.1.0 (doc id = bare file name, one document per name in the store).
2: documents keyed by (tenant, doc id), access fields, revisions and a journal per write.
3: ``file_name`` (the basename) on pages and document records, ``source`` on records, pages of
an uncommitted revision marked ``write_state: pending``, the multivector layout in the store record.
4: each document record carries its card (see the cards below): match keys, the first page's dense
vectors, the card text's BM25 vector in a store with lexical vectors."""

PAGE_FIELDS: tuple[str, ...] = (
    "doc_id",
    "doc_version",
    "page",
    "n_pages",
    "section",
    "text",
    "source",
    "tenant",
    "acl",
    "width",
    "height",
    "ocr",
)

PACKAGE_FIELDS = frozenset(
    {*PAGE_FIELDS, KIND, FILE_NAME, WRITE_STATE, REVISION, TENANT_KEY, ACCESS, DOC_KEY, USER}
)
"""Top-level payload keys the package writes: filters name them directly, the app's own keys
live under :data:`USER`."""

IndexKind = Literal["keyword", "integer", "float", "bool"]
# (payload key, index type, is_tenant): the fields every filter of this package touches.
PAYLOAD_INDEXES: tuple[tuple[str, IndexKind, bool], ...] = (
    ("doc_id", "keyword", False),
    ("doc_version", "keyword", False),
    ("tenant", "keyword", False),
    ("acl", "keyword", False),
    (KIND, "keyword", False),
    ("page", "integer", False),
    (FILE_NAME, "keyword", False),
    ("source", "keyword", False),
    (WRITE_STATE, "keyword", False),
    (TENANT_KEY, "keyword", True),
    (ACCESS, "keyword", False),
    (DOC_KEY, "keyword", False),
    (REVISION, "keyword", False),
)


@dataclass(frozen=True)
class PointData:
    """One point ready to write: id, named dense vectors (none for records), payload."""

    id: str
    dense: dict[str, np.ndarray] = field(default_factory=dict)
    sparse: SparseVector | None = None
    payload: dict[str, Any] = field(default_factory=dict)


def file_name(source: str, doc_id: str) -> str:
    """The base name LlamaIndex shows as ``file_name``: of the file's path, else of the doc id."""
    path = source or doc_id
    return PureWindowsPath(path).name if "\\" in path else PurePosixPath(path).name


def access_payload(tenant: str | None, doc_id: str, acl: list[str]) -> dict[str, Any]:
    """The identity and access fields every point of a document carries."""
    return {
        TENANT_KEY: tenant_key(tenant),
        ACCESS: access_values(acl),
        DOC_KEY: document_point_id(tenant, doc_id),
    }


def page_payload(record: PageRecord, revision_id: str, *, pending: bool = False) -> dict[str, Any]:
    """A page's payload as part of its document's revision; ``pending`` while it is written."""
    payload: dict[str, Any] = {name: getattr(record, name) for name in PAGE_FIELDS}
    payload["acl"] = list(record.acl)
    payload[KIND] = KIND_PAGE
    payload[FILE_NAME] = file_name(record.source, record.doc_id)
    payload.update(access_payload(record.tenant, record.doc_id, record.acl))
    payload[REVISION] = revision_id
    if record.metadata:
        payload[USER] = dict(record.metadata)
    if pending:
        payload[WRITE_STATE] = PENDING
    return payload


def document_payload(schema: DocumentSchema) -> dict[str, Any]:
    """The schema as JSON text, beside the fields that filters need."""
    return {
        KIND: KIND_DOCUMENT,
        "doc_id": schema.doc_id,
        "doc_version": schema.doc_version,
        "tenant": schema.tenant,
        "acl": list(schema.acl),
        "source": schema.source,
        FILE_NAME: file_name(schema.source, schema.doc_id),
        REVISION: revision(schema.doc_version, schema.acl, schema.metadata_digest),
        **access_payload(schema.tenant, schema.doc_id, list(schema.acl)),
        "schema": schema.model_dump_json(),
    }


def schema_from_payload(payload: dict[str, Any]) -> DocumentSchema:
    return DocumentSchema.model_validate_json(payload["schema"])


def journal_point(doc_key: str, revision_id: str | None, route: str) -> PointData:
    """The note written before a document's pages change: which document (and tenant key), which
    revision is coming (None: the document is being deleted). Recovery reads it after a crash."""
    return PointData(
        journal_point_id(doc_key),
        payload={
            KIND: KIND_JOURNAL,
            DOC_KEY: doc_key,
            TENANT_KEY: route,
            REVISION: revision_id,
        },
    )


@dataclass(frozen=True)
class StoreMeta:
    """What a store was created with; a store is only ever queried with the same encoder.

    ``encoder_settings`` (:meth:`~llama_index_docmemo.encoders.base.PageEncoder.settings`)
    rebuild the encoder with its name, so a store reopens from its path alone (absent in
    stores of 0.1.0: the name alone then)."""

    encoder_name: str
    dim: int
    sparse: bool
    layout: MultivectorLayout = LEGACY
    encoder_settings: dict[str, Any] = field(default_factory=dict)

    def payload(self, layout_version: int = LAYOUT_VERSION) -> dict[str, Any]:
        return {
            KIND: KIND_STORE,
            "layout": layout_version,
            "encoder_name": self.encoder_name,
            "dim": self.dim,
            "sparse": self.sparse,
            "multivector_layout": self.layout.payload(),
            "encoder_settings": self.encoder_settings,
        }

    def point(self) -> PointData:
        return PointData(STORE_POINT_ID, payload=self.payload())

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> StoreMeta:
        return cls(
            str(payload["encoder_name"]),
            int(payload["dim"]),
            bool(payload["sparse"]),
            MultivectorLayout.from_payload(payload.get("multivector_layout")),
            dict(payload.get("encoder_settings") or {}),
        )

    def check(self, stored: StoreMeta, where: str) -> None:
        """Raise unless ``stored`` (what ``where`` holds) is what this store is opened with."""
        if (stored.encoder_name, stored.dim, stored.sparse) != (
            self.encoder_name,
            self.dim,
            self.sparse,
        ):
            raise StoreError(
                f"{where} was created with encoder '{stored.encoder_name}' (dim {stored.dim}, "
                f"sparse={stored.sparse}) but is opened with encoder '{self.encoder_name}' "
                f"(dim {self.dim}, sparse={self.sparse}): use the same encoder, or another store"
            )
        if stored.layout != self.layout:
            raise StoreError(
                f"{where} was created with the multivector layout {stored.layout} but is opened "
                f"with {self.layout}: open it with layout=None (the stored one), or index "
                "into another store"
            )


# -- checks -------------------------------------------------------------------------------------


def dense(array: object, shape: tuple[int | None, ...], what: str) -> np.ndarray:
    """``array`` as float32 of ``shape`` (None: any positive length), finite, or a StoreError."""
    try:
        values = np.asarray(array, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what}: not a numeric array ({exc})") from exc
    expected = "(" + ", ".join("n" if n is None else str(n) for n in shape) + ")"
    if values.ndim != len(shape) or any(
        (n is None and got < 1) or (n is not None and got != n)
        for n, got in zip(shape, values.shape, strict=False)
    ):
        raise StoreError(f"{what}: shape {values.shape}, expected {expected}")
    if not np.isfinite(values).all():
        raise StoreError(f"{what}: contains NaN or infinite values")
    return values


def sparse(vector: SparseVector, what: str) -> SparseVector | None:
    """A checked sparse vector, or None when it has no terms (Qdrant stores nothing then)."""
    if len(vector.indices) != len(vector.values):
        raise StoreError(
            f"{what}: sparse vector has {len(vector.indices)} indices but {len(vector.values)} values"
        )
    if len(set(vector.indices)) != len(vector.indices):
        raise StoreError(f"{what}: sparse vector has repeated indices")
    if any(not 0 <= int(i) < 2**32 for i in vector.indices):
        raise StoreError(f"{what}: sparse vector index outside [0, 2**32)")
    if any(not math.isfinite(float(v)) for v in vector.values):
        raise StoreError(f"{what}: sparse vector contains NaN or infinite values")
    if not vector.indices:
        return None
    return SparseVector(
        tuple(int(i) for i in vector.indices), tuple(float(v) for v in vector.values)
    )


@dataclass(frozen=True)
class CheckedEmbedding:
    """A validated page or query embedding: float32 arrays, sparse part only if stored."""

    multi: np.ndarray
    pooled: np.ndarray
    sparse: SparseVector | None
    grid: tuple[int, int] | None


def checked_embedding(
    embedding: PageEmbedding, dim: int, *, use_sparse: bool, what: str
) -> CheckedEmbedding:
    """Check an embedding against the store's dimension; keep the sparse part only if stored."""
    multi = dense(embedding.multivector, (None, dim), f"{what}: multivector")
    pooled = dense(embedding.pooled, (dim,), f"{what}: pooled vector")
    lexical = None
    if use_sparse and embedding.sparse is not None:
        lexical = sparse(embedding.sparse, what)
    grid = embedding.grid
    if grid is not None and (len(grid) != 2 or int(grid[0]) * int(grid[1]) != len(multi)):
        raise StoreError(f"{what}: patch grid {grid} does not hold {len(multi)} vectors")
    return CheckedEmbedding(multi, pooled, lexical, grid)


def lay_out(embedding: PageEmbedding, layout: MultivectorLayout, dim: int) -> PageEmbedding:
    """``embedding`` with the vectors ``layout`` stores for it attached (:class:`StoredVectors`),
    for a worker to compute beside its encoder. An embedding the store would reject is returned
    as it is: the write rejects it, naming its document and page."""
    try:
        checked = checked_embedding(embedding, dim, use_sparse=False, what="page")
        vectors = layout.page_vectors(checked.multi, checked.pooled, checked.grid)
    except StoreError:
        return embedding
    return replace(embedding, stored=StoredVectors(layout.payload(), vectors))


def stored_vectors(
    stored: StoredVectors | None, layout: MultivectorLayout, dim: int, what: str
) -> dict[str, np.ndarray] | None:
    """Checked laid-out vectors when they were made for ``layout``, else None (compute them)."""
    if stored is None or stored.layout != layout.payload():
        return None
    first = layout.first_stage_vector
    if set(stored.vectors) != {MULTI, first}:
        raise StoreError(
            f"{what}: laid-out vectors {sorted(stored.vectors)}, the layout stores "
            f"{sorted({MULTI, first})}"
        )
    first_shape: tuple[int | None, ...] = {
        "mean": (dim,),
        "rows_cols": (None, dim),
        "muvera": (layout.first_stage_dim,),
    }[layout.first_stage]
    return {
        MULTI: dense(stored.vectors[MULTI], (None, dim), f"{what}: laid-out {MULTI}"),
        first: dense(stored.vectors[first], first_shape, f"{what}: laid-out {first}"),
    }


def _check_names(schema: DocumentSchema, doc: str) -> None:
    try:
        check_name("doc_id", schema.doc_id)
        if schema.tenant is not None:
            check_name("tenant", schema.tenant)
        for group in schema.acl:
            check_name("ACL group", group)
        check_utf8("source file name", schema.source)
    except ValueError as exc:
        raise StoreError(f"{doc}: {exc}") from exc


def _check_record(record: PageRecord, schema: DocumentSchema, seen: set[int], what: str) -> None:
    if record.doc_id != schema.doc_id or record.doc_version != schema.doc_version:
        raise StoreError(
            f"{what}: record belongs to {record.doc_id!r} version {record.doc_version[:12]}"
        )
    if record.tenant != schema.tenant or sorted(record.acl) != sorted(schema.acl):
        raise StoreError(f"{what}: tenant or ACL differs from the document's")
    if not 1 <= record.page <= record.n_pages:
        raise StoreError(f"{what}: page number outside 1..{record.n_pages}")
    if record.page in seen:
        raise StoreError(f"{what}: page given twice")
    seen.add(record.page)


def document_points(
    schema: DocumentSchema,
    pages: Sequence[PageRecord],
    embeddings: Sequence[PageEmbedding],
    *,
    dim: int,
    use_sparse: bool,
    layout: MultivectorLayout,
) -> tuple[list[PointData], PointData]:
    """Page points (marked pending: the record commits them) and the record point of a document.

    Raises:
        DocumentRejectedError: naming the document and page of the first bad name, record or
            embedding.
    """
    try:
        return _document_points(schema, pages, embeddings, dim, use_sparse, layout)
    except StoreError as exc:
        raise DocumentRejectedError(str(exc)) from exc


def _document_points(
    schema: DocumentSchema,
    pages: Sequence[PageRecord],
    embeddings: Sequence[PageEmbedding],
    dim: int,
    use_sparse: bool,
    layout: MultivectorLayout,
) -> tuple[list[PointData], PointData]:
    doc = f"document {schema.doc_id!r} (version {schema.doc_version[:12]})"
    _check_names(schema, doc)
    if len(pages) != len(embeddings):
        raise StoreError(f"{doc}: {len(pages)} pages but {len(embeddings)} embeddings")
    seen: set[int] = set()
    points: list[PointData] = []
    record_point = PointData(
        document_point_id(schema.tenant, schema.doc_id), payload=document_payload(schema)
    )
    rev = str(record_point.payload[REVISION])
    for record, embedding in zip(pages, embeddings, strict=True):
        what = f"{doc} page {record.page}"
        _check_record(record, schema, seen, what)
        vectors = checked_embedding(embedding, dim, use_sparse=use_sparse, what=what)
        laid_out = stored_vectors(embedding.stored, layout, dim, what)
        points.append(
            PointData(
                id=page_point_id(record_point.id, rev, record.page),
                dense=laid_out or layout.page_vectors(vectors.multi, vectors.pooled, vectors.grid),
                sparse=vectors.sparse,
                payload=page_payload(record, rev, pending=True),
            )
        )
    return points, record_point


# -- cards --------------------------------------------------------------------------------------

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
