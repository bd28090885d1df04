"""DocMemoIndex: the LlamaIndex way in (``from_documents`` -> ``as_query_engine``).

An app that builds ``VectorStoreIndex.from_documents(docs)`` and calls ``as_query_engine()``
changes one name. The Documents of ``SimpleDirectoryReader``, ``PyMuPDFReader`` or ``PDFReader``
(one per page) are grouped into documents by their ``file_path``; a PDF that exists on disk
also gives page images, its outline and OCR for pages the reader left empty, otherwise the pages
are indexed as text. Their metadata goes with every page. Pages live in a
:class:`~llama_index_docmemo.store.base.PageStore` (an embedded Qdrant Edge folder by default,
or a Qdrant server), one point per page.

Not a ``BaseIndex``: that class is built around a docstore of nodes and an index struct
persisted through a ``StorageContext``; DocMemo's pages, their schema and their versions live in
the page store, written as they are indexed. A docstore here would be a second, stale copy, so
the ``BaseIndex`` attributes raise an error pointing to :meth:`DocMemoIndex.from_store`.
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.chat_engine.types import ChatMode

from llama_index_docmemo.errors import StoreError, printable
from llama_index_docmemo.ingest.documents import (
    document_file,
    is_page_document,
    located,
    outside_root,
    skipped_neighbours,
)
from llama_index_docmemo.paths import default_store_dir
from llama_index_docmemo.store.metadata import user_metadata
from llama_index_docmemo.store.scope import PageFilter, ScopeLike, caller

if TYPE_CHECKING:
    from llama_index.core.chat_engine.types import BaseChatEngine
    from llama_index.core.llms import LLM
    from llama_index.core.schema import Document

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.indexing import DocumentIndexer, IndexReport
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.retriever import DocMemoRetriever
    from llama_index_docmemo.store.base import PageStore

logger = logging.getLogger(__name__)

NO_DOCUMENTS = (
    "DocMemoIndex.from_documents got no Documents: the index answers from nothing until "
    "documents are inserted (did the reader match no files? DocMemoIndex.from_store(store) "
    "answers from everything a store holds)"
)
_BASE_INDEX_ATTRIBUTES = frozenset(
    {"storage_context", "docstore", "index_struct", "index_id", "vector_store"}
)
_REFUSED_CHAT_MODES = {
    ChatMode.SIMPLE: "it does not read the index: use SimpleChatEngine.from_defaults() directly",
    ChatMode.REACT: "agents take the engine as a tool: "
    "FunctionAgent(tools=[QueryEngineTool.from_defaults(index.as_query_engine(), ...)])",
    ChatMode.OPENAI: "agents take the engine as a tool: "
    "FunctionAgent(tools=[QueryEngineTool.from_defaults(index.as_query_engine(), ...)])",
}


class DocMemoIndex:
    """Pages of documents in a page store, queried by the DocMemo loop.

    Args:
        store: the page store.
        encoder: the encoder that fills it (default: the one the store records).
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
        self.encoder = encoder or load_encoder(store.encoder_name, store.encoder_settings)
        self.identity = caller(PageFilter(tenant=tenant, acl_groups=tuple(acl or ()) or None))
        self.root = Path(root) if root is not None else None
        self.indexer = indexer or DocumentIndexer(store, self.encoder)
        self.report: IndexReport | None = None
        self._documents: set[str] | None = None  # from_documents: the ids it answers from
        self._reader_ids: dict[str, tuple[str, bool]] = {}  # Document.id_ -> (doc id, whole file)
        _warn_unused_embed_model(self.encoder.name)

    @property
    def tenant(self) -> str | None:
        """The tenant its documents are written with and its queries read as."""
        return self.identity.tenant

    @property
    def acl(self) -> tuple[str, ...]:
        """The ACL groups its documents are written with and its queries read as."""
        return self.identity.acl_groups or ()

    def __getattr__(self, name: str) -> Any:
        if name in _BASE_INDEX_ATTRIBUTES:
            raise AttributeError(
                f"DocMemoIndex has no {name}: it is not a LlamaIndex BaseIndex with a docstore "
                f"(its pages live in the page store, {_where(self.store)}, written as they are "
                "indexed: nothing to persist, and load_index_from_storage cannot open it); "
                f"reopen it with DocMemoIndex.from_store({_reopen_argument(self.store)})"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
        """Index ``documents`` (page Documents of PDF readers, any Documents with a
        ``file_path`` / ``file_name``, or text Documents, stored under their ``doc_id``) with
        their metadata, and return the index.

        The index answers from these documents and those :meth:`insert` adds later, whatever
        else the store holds (:meth:`from_store` answers from the whole store). With
        ``store=None`` the pages go to an embedded store in :func:`default_store_dir`
        (``$DOCMEMO_STORE_DIR`` overrides; one process at a time may open it), shared with the
        ``docmemo`` command; a file the store holds keeps its id there. A file that
        cannot be read, one outside ``root`` and a PDF beside them that the reader skipped are
        named in a warning and in :attr:`report`; every other one is indexed. No Documents at
        all is a warning. ``indexer_options`` go to ``DocumentIndexer`` (``ocr=``,
        ``summarizer=``...).
        """
        from llama_index_docmemo.indexing import DocumentIndexer

        if store is None:
            from llama_index_docmemo.store import open_store

            store = open_store(path=default_store_dir(), encoder=encoder)
        root = root if root is not None else _common_folder(documents)
        index = cls(store, encoder, tenant=tenant, acl=acl, root=root)
        index._documents = set()
        if indexer_options:
            index.indexer = DocumentIndexer(index.store, index.encoder, **indexer_options)
        report = index._index_documents(documents, progress=show_progress)
        if not documents:
            logger.warning(NO_DOCUMENTS)
            report.warnings.append(NO_DOCUMENTS)
        return index

    @classmethod
    def from_store(
        cls,
        store: PageStore | str | os.PathLike[str],
        encoder: PageEncoder | None = None,
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        root: str | os.PathLike[str] | None = None,
        **store_options: Any,
    ) -> DocMemoIndex:
        """An index over what a store already holds: a :class:`PageStore`, the folder of an
        embedded store, or a Qdrant server's URL (``store_options`` of :func:`open_store`:
        ``api_key``, ``collection``...). The encoder is the one the store records."""
        if not isinstance(store, str | os.PathLike):
            return cls(store, encoder, tenant=tenant, acl=acl, root=root)
        from llama_index_docmemo.store import open_store

        where = os.fspath(store)
        if where.startswith(("http://", "https://")):
            opened = open_store(url=where, encoder=encoder, **store_options)
        else:
            if not Path(where).is_dir() or not any(Path(where).iterdir()):
                raise StoreError(
                    f"no page store at {where}: index documents into it first "
                    f"(DocMemoIndex.from_documents(documents, store=open_store({where!r})) or "
                    f"docmemo index FOLDER --store {where})"
                )
            opened = open_store(path=where, encoder=encoder, **store_options)
        return cls(opened, encoder, tenant=tenant, acl=acl, root=root)

    # -- querying -----------------------------------------------------------------------------
    def scope(self, filters: ScopeLike = None, page_filter: ScopeLike = None) -> PageFilter:
        """The index's caller (tenant, ACL groups) and, for an index built by
        :meth:`from_documents`, its documents (those given and those inserted since), narrowed
        by ``filters`` and ``page_filter`` (both, when both are given)."""
        own = self.identity
        if self._documents is not None:
            own = replace(own, doc_ids=tuple(sorted(self._documents)))
        return own.narrow(filters).narrow(page_filter)

    def as_query_engine(
        self, *, filters: ScopeLike = None, page_filter: ScopeLike = None, **kwargs: Any
    ) -> DocMemoQueryEngine:
        """A :class:`~llama_index_docmemo.DocMemoQueryEngine` over the index (``kwargs`` of
        ``DocMemoQueryEngine.from_defaults``: ``llm``, ``config``, ``similarity_top_k``,
        ``node_postprocessors``, ``response_mode``, ``streaming``, ``images``...; the reader is
        ``Settings.llm`` unless given)."""
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
        """A retriever returning the first round's ``similarity_top_k`` pages (up to 1000;
        ``kwargs`` of :class:`~llama_index_docmemo.DocMemoRetriever`: ``config``,
        ``reranker``...)."""
        from llama_index_docmemo.retriever import DocMemoRetriever

        return DocMemoRetriever(
            self.store,
            self.encoder,
            page_filter=self.scope(filters, page_filter),
            similarity_top_k=similarity_top_k,
            **kwargs,
        )

    def as_chat_engine(
        self, chat_mode: ChatMode | str = ChatMode.BEST, llm: LLM | None = None, **kwargs: Any
    ) -> BaseChatEngine:
        """A LlamaIndex chat engine over the index.

        ``chat_mode``: "best" (the default) and "condense_question" condense each turn into a
        standalone question the DocMemo loop answers (``CondenseQuestionChatEngine``; the final
        answer is streamed, so ``stream_chat`` works); "context" and "condense_plus_context"
        put the pages of :meth:`as_retriever` in the LLM's context (no loop). "simple", "react"
        and "openai" are refused, saying what to use. ``llm`` reads and chats (default
        ``Settings.llm``; ``chat_llm`` for another condensing LLM); the other ``kwargs`` go to
        the chat engine when it takes them (``memory``, ``system_prompt``...), else to
        :meth:`as_query_engine` / :meth:`as_retriever`.
        """
        from llama_index.core.chat_engine import (
            CondensePlusContextChatEngine,
            CondenseQuestionChatEngine,
            ContextChatEngine,
        )

        mode = _chat_mode(chat_mode)
        chat_llm = kwargs.pop("chat_llm", None) or llm
        if mode in (ChatMode.BEST, ChatMode.CONDENSE_QUESTION):
            chat, rest = _split(CondenseQuestionChatEngine.from_defaults, kwargs)
            rest.setdefault("streaming", True)  # stream_chat needs a StreamingResponse
            engine = self.as_query_engine(llm=llm, **rest)
            return CondenseQuestionChatEngine.from_defaults(
                query_engine=engine, llm=chat_llm, **chat
            )
        engine_class = (
            ContextChatEngine if mode == ChatMode.CONTEXT else CondensePlusContextChatEngine
        )
        chat, rest = _split(engine_class.from_defaults, kwargs)
        return engine_class.from_defaults(retriever=self.as_retriever(**rest), llm=chat_llm, **chat)

    # -- keeping it current -------------------------------------------------------------------
    def insert(self, document: Document, **_: Any) -> None:
        """Index one Document: the whole PDF its ``file_path`` names when that file exists
        (every page, images, OCR), else its text; a Document that names no file is stored
        under its own ``doc_id``. A document already stored under the same id is replaced; a
        file outside :attr:`root` is named in a warning and in :attr:`report`."""
        from llama_index_docmemo.indexing import IndexReport

        _, source = document_file(document)
        path = Path(source)
        if not (located(document) and path.is_file() and path.suffix.lower() == ".pdf"):
            self._index_documents([document])
            return
        root = self.root or path.parent
        if os.path.relpath(path.resolve(), Path(root).resolve()).startswith(os.pardir):
            failure = outside_root(str(path), root)
            self._keep(IndexReport(failed=[(failure.path, failure.reason)]))
            return
        metadata, left_out = user_metadata(document.metadata)
        report = self.indexer.index_paths(
            [path], root=root, tenant=self.tenant, acl=list(self.acl), metadata=metadata
        )
        report.warnings += [f"{path}: {problem}" for problem in left_out]
        doc_id = report.doc_ids.get(str(path))
        if doc_id is not None:  # a page Document of a longer file is not all of its document
            schema = self.store.get_schema(doc_id, tenant=self.tenant)
            pages = schema.n_pages if schema is not None else 1
            whole = pages == 1 or not is_page_document(document)
            self._reader_ids[document.doc_id] = (doc_id, whole)
        self._keep(report)

    def delete_ref_doc(self, ref_doc_id: str, **_: Any) -> None:
        """Remove a document with all its pages, the same way however it was indexed.

        ``ref_doc_id`` is the document's id as nodes carry it (``node.ref_doc_id``: the file's
        path relative to :attr:`root`, or a text Document's ``doc_id``), or the ``doc_id`` of a
        Document that held the whole file (a Markdown file, a reader's one-Document PDF). The
        ``doc_id`` of a page Document (one page of a PDF, from ``from_documents`` or
        :meth:`insert`) deletes nothing: DocMemo stores whole files, and the warning names the
        id that deletes the file. An index built by :meth:`from_documents` deletes only its own
        documents."""
        doc_id, whole = self._reader_ids.get(ref_doc_id, (ref_doc_id, True))
        if not whole:
            logger.warning(
                "ref_doc_id %r is one page Document of %r: DocMemo stores whole files, nothing "
                "deleted; delete_ref_doc(%r) removes the file with all its pages",
                ref_doc_id,
                doc_id,
                doc_id,
            )
        elif self._documents is not None and doc_id not in self._documents:
            logger.warning(
                "ref_doc_id %r is not a document of this index, nothing deleted: pass a document "
                "id as its nodes carry it (node.ref_doc_id, e.g. '2023/10k.pdf')",
                ref_doc_id,
            )
        elif not self.store.delete_document(doc_id, tenant=self.tenant):
            logger.warning(
                "ref_doc_id %r not found, nothing deleted: pass a document id as nodes carry it "
                "(node.ref_doc_id, e.g. '2023/10k.pdf', the path relative to the indexed folder)",
                ref_doc_id,
            )
        elif self._documents is not None:
            self._documents.discard(doc_id)

    def refresh_ref_docs(self, documents: Sequence[Document], **_: Any) -> list[bool]:
        """Re-index the documents whose content or metadata changed; for each Document given,
        whether its document was (re)indexed (False: unchanged, or failed: see :attr:`report`)."""
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
        report.failed += [(exc.path, exc.reason) for exc in skipped_neighbours(documents)]
        per_document = Counter(report.doc_ids.get(_source(d)) for d in documents)
        for document in documents:
            doc_id = report.doc_ids.get(_source(document))
            if doc_id is not None:
                self._reader_ids[document.doc_id] = (doc_id, per_document[doc_id] == 1)
        return self._keep(report)

    def _keep(self, report: IndexReport) -> IndexReport:
        self.report = report
        if self._documents is not None:
            self._documents.update(report.doc_ids[s] for s in report.indexed + report.unchanged)
        for source, reason in report.failed:
            logger.warning("not indexed: %s: %s", printable(source), printable(reason))
        return report


def _chat_mode(chat_mode: ChatMode | str) -> ChatMode:
    """The chat mode DocMemo serves, or a ValueError naming it and the modes there are."""
    try:
        mode = ChatMode(chat_mode)
    except ValueError:
        known = ", ".join(m.value for m in ChatMode if m not in _REFUSED_CHAT_MODES)
        raise ValueError(
            f"chat_mode={chat_mode!r} is not a chat mode (DocMemo's: {known})"
        ) from None
    if mode in _REFUSED_CHAT_MODES:
        raise ValueError(
            f"chat_mode={mode.value!r} is not served by DocMemoIndex: {_REFUSED_CHAT_MODES[mode]}"
        )
    return mode


def _split(
    factory: Callable[..., Any], kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` the chat engine's ``from_defaults`` names, and the rest."""
    named = set(inspect.signature(factory).parameters) - {"kwargs", "llm"}
    chat = {k: v for k, v in kwargs.items() if k in named}
    return chat, {k: v for k, v in kwargs.items() if k not in named}


def _warn_unused_embed_model(encoder_name: str) -> None:
    """Say (once per place it is built from) that ``Settings.embed_model`` is not used."""
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.settings import Settings

    from llama_index_docmemo.encoders.embedding import EncoderEmbedding

    try:
        embed_model = Settings.embed_model
    except (ValueError, ImportError):  # LlamaIndex's default (OpenAI) has no key here: unset
        return
    if isinstance(embed_model, MockEmbedding | EncoderEmbedding):  # none, or this package's
        return
    warnings.warn(
        f"Settings.embed_model ({type(embed_model).__name__}) is not used: DocMemo searches "
        f"pages with its page encoder {encoder_name!r} (one multivector a page scored by "
        "MaxSim, fused with BM25), which one embedding vector a page cannot stand in for; "
        "choose the page encoder with encoder=",
        UserWarning,
        stacklevel=3,
    )


def _where(store: PageStore) -> str:
    return str(getattr(store, "location", type(store).__name__))


def _reopen_argument(store: PageStore) -> str:
    path = getattr(store, "path", None) or getattr(store, "_url", None)
    return repr(str(path)) if path else "store"


def _source(document: Document) -> str:
    """The source a Document's pages are reported under (an existing file's absolute path)."""
    _, source = document_file(document)
    if located(document) and os.path.isfile(source):
        return os.path.abspath(source)
    return source


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
