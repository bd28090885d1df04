"""What each point carries: page, document, journal and store payloads, and the payload indexes.

Pure functions over plain data. Both backends store exactly these payloads, so a store written
through one backend is read back identically by the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, Literal

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import ids
from llama_index_docmemo.store.layouts import LEGACY, MultivectorLayout
from llama_index_docmemo.types import PageRecord, SparseVector

if TYPE_CHECKING:
    import numpy as np

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
"""The tenant, or :data:`~.ids.NO_TENANT` (:func:`~.ids.tenant_key`)."""
ACCESS = "access"
"""The document's ACL groups, or ``[PUBLIC]`` when it has none (:func:`~.ids.access_values`)."""
DOC_KEY = "doc_key"
"""The document's identity (tenant + doc id) as one keyword, shared by all its points."""

LAYOUT_VERSION = 4
"""1: llama-index-docmemo 0.1.0 (doc id = bare file name, one document per name in the store).
2: documents keyed by (tenant, doc id), access fields, revisions and a journal per write.
3: ``file_name`` (the basename) on pages and document records, ``source`` on records, pages of
an uncommitted revision marked ``write_state: pending``, the multivector layout in the store record.
4: each document record carries its card (:mod:`.cards`): match keys, the first page's dense
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
    """The identity and access fields every point of a document carries (see :mod:`.ids`)."""
    return {
        TENANT_KEY: ids.tenant_key(tenant),
        ACCESS: ids.access_values(acl),
        DOC_KEY: ids.document_point_id(tenant, doc_id),
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
        REVISION: ids.revision(schema.doc_version, schema.acl, schema.metadata_digest),
        **access_payload(schema.tenant, schema.doc_id, list(schema.acl)),
        "schema": schema.model_dump_json(),
    }


def schema_from_payload(payload: dict[str, Any]) -> DocumentSchema:
    return DocumentSchema.model_validate_json(payload["schema"])


def journal_point(doc_key: str, revision_id: str | None, route: str) -> PointData:
    """The note written before a document's pages change: which document (and tenant key), which
    revision is coming (None: the document is being deleted). Recovery reads it after a crash."""
    return PointData(
        ids.journal_point_id(doc_key),
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
        return PointData(ids.STORE_POINT_ID, payload=self.payload())

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
