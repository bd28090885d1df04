"""DocMemoIndex: the LlamaIndex way in (``from_documents`` -> ``as_query_engine``).

An app that builds ``VectorStoreIndex.from_documents(docs)`` and calls ``as_query_engine()``
changes one name. The Documents of ``SimpleDirectoryReader``, ``PyMuPDFReader`` or ``PDFReader``
(one per page) are grouped into documents by their ``file_path``; a PDF that exists on disk
also gives page images, its outline and OCR for pages the reader left empty, otherwise the pages
are indexed as text. Pages live in a :class:`~llama_index_docmemo.store.base.PageStore` (an
embedded Qdrant Edge folder by default, or a Qdrant server), one point per page.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.errors import printable
from llama_index_docmemo.ingest.documents import document_file
from llama_index_docmemo.paths import default_store_dir
from llama_index_docmemo.store.identity import ScopeLike, caller, narrow
from llama_index_docmemo.types import PageFilter

if TYPE_CHECKING:
    from llama_index.core.chat_engine.types import BaseChatEngine
    from llama_index.core.schema import Document

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.indexing import DocumentIndexer, IndexReport
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.retriever import DocMemoRetriever
    from llama_index_docmemo.store.base import PageStore

logger = logging.getLogger(__name__)


class DocMemoIndex:
    """Pages of documents in a page store, queried by the DocMemo loop.

    Args:
        store: the page store.
        encoder: the encoder that fills it (default: the one the store was built with).
        tenant / acl: whose documents these are: documents are written with them, and queries
            read as a caller of that tenant holding those groups. Every ``filters`` /
            ``page_filter`` given later only narrows this caller; one that names another tenant
            or a group outside ``acl`` raises :class:`~llama_index_docmemo.IdentityError`.
        root: document ids are file paths relative to this folder (default: the common folder
            of the files given to :meth:`from_documents`, else each file's own folder).
        indexer: how Documents are read and written (default: ``DocumentIndexer(store,
            encoder)``, OCR when Tesseract is installed).
    """

    def __init__(
        self,
        store: PageStore,
        encoder: PageEncoder | None = None,
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        root: str | os.PathLike[str] | None = None,
        indexer: DocumentIndexer | None = None,
    ) -> None:
        from llama_index_docmemo.encoders import load_encoder
        from llama_index_docmemo.indexing import DocumentIndexer

        self.store = store
        self.encoder = encoder or load_encoder(store.encoder_name)
        self.identity = caller(PageFilter(tenant=tenant, acl_groups=tuple(acl or ()) or None))
        self.tenant = tenant
        self.acl = tuple(acl or ())
        self.root = Path(root) if root is not None else None
        self.indexer = indexer or DocumentIndexer(store, self.encoder)
        self.report: IndexReport | None = None

    # -- building -----------------------------------------------------------------------------
    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        store: PageStore | None = None,
        encoder: PageEncoder | None = None,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        root: str | os.PathLike[str] | None = None,
        show_progress: bool = False,
        **indexer_options: Any,
    ) -> DocMemoIndex:
        """Index ``documents`` (page Documents of PDF readers, or any Documents with a
        ``file_path`` / ``file_name``) and return the index.

        With ``store=None`` the pages go to an embedded store in the platform's user data folder
        (``$DOCMEMO_STORE_DIR`` overrides; one process at a time may open it). A file that
        cannot be read is named in a warning and in :attr:`report`; every other one is indexed.
        ``indexer_options`` go to ``DocumentIndexer`` (``ocr=``, ``summarizer=``...).
        """
        from llama_index_docmemo.indexing import DocumentIndexer

        if store is None:
            from llama_index_docmemo.encoders import default_encoder
            from llama_index_docmemo.store import open_store

            encoder = encoder or default_encoder()
            store = open_store(path=default_store_dir(), encoder=encoder)
        root = root if root is not None else _common_folder(documents)
        index = cls(store, encoder, tenant=tenant, acl=acl, root=root)
        if indexer_options:
            index.indexer = DocumentIndexer(index.store, index.encoder, **indexer_options)
        index._index_documents(documents, progress=show_progress)
        return index

    @classmethod
    def from_store(
        cls,
        store: PageStore,
        encoder: PageEncoder | None = None,
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        root: str | os.PathLike[str] | None = None,
    ) -> DocMemoIndex:
        """An index over what ``store`` already holds."""
        return cls(store, encoder, tenant=tenant, acl=acl, root=root)

    # -- querying -----------------------------------------------------------------------------
    def scope(self, filters: ScopeLike = None, page_filter: ScopeLike = None) -> PageFilter:
        """The index's caller (tenant, ACL groups) narrowed by ``filters`` and ``page_filter``
        (both, when both are given)."""
        return narrow(narrow(self.identity, filters), page_filter)

    def as_query_engine(
        self, *, filters: ScopeLike = None, page_filter: ScopeLike = None, **kwargs: Any
    ) -> DocMemoQueryEngine:
        """A :class:`~llama_index_docmemo.DocMemoQueryEngine` over the index (``kwargs`` of
        ``DocMemoQueryEngine.from_defaults``: ``llm``, ``config``, ``images``, ``streaming``...;
        the reader is ``Settings.llm`` unless given)."""
        from llama_index_docmemo.query_engine import DocMemoQueryEngine

        return DocMemoQueryEngine.from_defaults(
            store=self.store,
            encoder=self.encoder,
            page_filter=self.scope(filters, page_filter),
            **kwargs,
        )

    def as_retriever(
        self,
        *,
        similarity_top_k: int | None = None,
        filters: ScopeLike = None,
        page_filter: ScopeLike = None,
        **kwargs: Any,
    ) -> DocMemoRetriever:
        """A retriever returning the first round's ``similarity_top_k`` pages (``kwargs`` of
        :class:`~llama_index_docmemo.DocMemoRetriever`: ``config``, ``reranker``...)."""
        from llama_index_docmemo.retriever import DocMemoRetriever

        return DocMemoRetriever(
            self.store,
            self.encoder,
            page_filter=self.scope(filters, page_filter),
            similarity_top_k=similarity_top_k,
            **kwargs,
        )

    def as_chat_engine(self, **kwargs: Any) -> BaseChatEngine:
        """A chat engine that condenses each turn into a standalone question and answers it
        with the DocMemo loop (LlamaIndex's ``CondenseQuestionChatEngine``; ``kwargs`` of
        :meth:`as_query_engine`, and ``chat_llm`` for the condensing LLM)."""
        from llama_index.core.chat_engine import CondenseQuestionChatEngine

        chat_llm = kwargs.pop("chat_llm", None)
        return CondenseQuestionChatEngine.from_defaults(
            query_engine=self.as_query_engine(**kwargs), llm=chat_llm
        )

    # -- keeping it current -------------------------------------------------------------------
    def insert(self, document: Document) -> None:
        """Index one Document: the whole PDF its ``file_path`` names when that file exists
        (every page, images, OCR), else the Document's text as a document of its own. A
        document already stored under the same id is replaced."""
        _, source = document_file(document)
        path = Path(source)
        if path.is_file() and path.suffix.lower() == ".pdf":
            report = self.indexer.index_file(
                path, doc_id=self._doc_id(path), tenant=self.tenant, acl=list(self.acl)
            )
            self._keep(report)
        else:
            self._index_documents([document])

    def delete_ref_doc(self, ref_doc_id: str, **_: Any) -> None:
        """Remove a document (``ref_doc_id``: its id, as page nodes carry it) with all its
        pages; a warning when there is no such document."""
        if not self.store.delete_document(ref_doc_id, tenant=self.tenant):
            logger.warning("ref_doc_id %r not found, nothing deleted", ref_doc_id)

    def refresh_ref_docs(self, documents: Sequence[Document]) -> list[bool]:
        """Re-index the documents whose content changed; for each Document given, whether its
        document was (re)indexed (False: unchanged, or failed: see :attr:`report`)."""
        report = self._index_documents(documents)
        written = set(report.indexed)
        return [_source(d) in written for d in documents]

    # -- helpers ------------------------------------------------------------------------------
    def _index_documents(
        self, documents: Sequence[Document], *, progress: bool = False
    ) -> IndexReport:
        report = self.indexer.index_documents(
            documents,
            tenant=self.tenant,
            acl=list(self.acl),
            root=self.root,
            progress=progress,
        )
        return self._keep(report)

    def _keep(self, report: IndexReport) -> IndexReport:
        self.report = report
        for source, reason in report.failed:
            logger.warning("not indexed: %s: %s", printable(source), printable(reason))
        return report

    def _doc_id(self, path: Path) -> str:
        root = self.root or path.parent
        return Path(os.path.relpath(path.resolve(), Path(root).resolve())).as_posix()


def _source(document: Document) -> str:
    """The source a Document's pages are reported under (an existing file's absolute path)."""
    _, source = document_file(document)
    return os.path.abspath(source) if os.path.isfile(source) else source


def _common_folder(documents: Sequence[Document]) -> Path | None:
    """The folder holding every file the Documents name (None when none exists on disk)."""
    files = {
        os.path.abspath(path)
        for d in documents
        if (path := str(d.metadata.get("file_path") or "")) and os.path.isfile(path)
    }
    if not files:
        return None
    return Path(os.path.commonpath([os.path.dirname(f) for f in files]))
