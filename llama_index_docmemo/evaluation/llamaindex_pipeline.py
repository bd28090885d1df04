"""Stock LlamaIndex pipelines as their users build them, for the ``llamaindex-*`` baselines.

One ``Document`` per page -> ``SentenceSplitter`` with its defaults -> a chunk retriever:

- ``llamaindex-topk``: ``BM25Retriever.from_defaults`` (bm25s, English stemmer and stop words);
- ``llamaindex-vector``: a ``VectorStoreIndex`` whose embedding is this package's CPU encoder's
  pooled vector (:class:`~llama_index_docmemo.encoders.EncoderEmbedding`), the encoder DocMemo
  searches with.

The pages come from ``PyMuPDFReader`` (the PDF's text layer, no OCR: what a LlamaIndex user gets)
or, for the ``-ocr`` variants, from the page store's text, which holds Tesseract's text for pages
without a text layer; comparing the two separates the method from OCR. The pages of the retrieved
chunks, in chunk order, are what the engine reads, until the page budget (T x k) is reached; the
evaluation's reader then reads those pages once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_docmemo._extras import require
from llama_index_docmemo.evaluation.baselines import STOCK_ENGINES, EngineOutput, EvalEngine
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.readers.base import PageView, Reader, ReaderInput
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

if TYPE_CHECKING:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import BaseNode, Document, NodeWithScore

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.store.base import PageStore

PageDocuments = Callable[[str], "list[Document]"]
"""A document id -> one LlamaIndex ``Document`` per page, its 1-based page in ``metadata["source"]``."""


def pages_of_chunks(chunks: Sequence[tuple[int, float, int]], budget: int) -> list[int]:
    """Distinct pages of ranked chunks, best chunk first, until ``budget`` pages.

    ``chunks`` are (page, score, chunk position in the document); ties in score go to the earlier
    chunk, so the order does not depend on the retriever's tie handling.
    """
    ordered = sorted(chunks, key=lambda c: (-c[1], c[2]))
    pages: list[int] = []
    for page, _, _ in ordered:
        if len(pages) == budget:
            break
        if page not in pages:
            pages.append(page)
    return pages


def chunk_retriever(
    nodes: list[BaseNode], *, lexical: bool, top_k: int, encoder: PageEncoder | None = None
) -> BaseRetriever:
    """LlamaIndex's ``BM25Retriever`` (``lexical``) or a ``VectorStoreIndex`` retriever over
    ``nodes`` embedded with ``encoder``'s pooled vector, returning ``top_k`` chunks."""
    if lexical:
        bm25 = require(
            "llama_index.retrievers.bm25", extra="eval", feature="the BM25 stock LlamaIndex engines"
        )
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import
        return bm25.BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=top_k)
    from llama_index.core import VectorStoreIndex

    from llama_index_docmemo.encoders.embedding import EncoderEmbedding

    index = VectorStoreIndex(nodes, embed_model=EncoderEmbedding(encoder))
    return index.as_retriever(similarity_top_k=top_k)


def pdf_documents(pdf_dir: Path) -> PageDocuments:
    """Pages as ``PyMuPDFReader`` reads them (text layer only)."""

    def load(doc_id: str) -> list[Document]:
        from llama_index.readers.file import PyMuPDFReader

        return PyMuPDFReader().load_data(pdf_dir / doc_id)

    return load


def store_documents(store: PageStore) -> PageDocuments:
    """Pages as the page store holds them (OCR text for image-only pages), same metadata keys."""

    def load(doc_id: str) -> list[Document]:
        from llama_index.core.schema import Document

        schema = store.get_schema(doc_id)
        if schema is None:
            raise ValueError(f"document {doc_id!r} is not in the page store")
        refs = [PageRef(doc_id, page) for page in range(1, schema.n_pages + 1)]
        return [
            Document(
                text=record.text,
                metadata={
                    "source": str(record.page),
                    "file_path": record.source,
                    "total_pages": schema.n_pages,
                },
            )
            for record in store.get_pages(refs, PageFilter(doc_ids=(doc_id,)))
        ]

    return load


class StockLlamaIndexEngine(EvalEngine):
    """A stock LlamaIndex chunk retriever over one document's pages, read once up to ``budget`` pages.

    Args:
        name: one of :data:`STOCK_ENGINES`.
        documents: the document's pages as LlamaIndex ``Document`` objects.
        budget: pages to read (T x k).
        encoder: the embedding of the vector engines.
    """

    def __init__(
        self,
        name: str,
        documents: PageDocuments,
        *,
        budget: int,
        encoder: PageEncoder | None = None,
    ) -> None:
        if name not in STOCK_ENGINES:
            raise ValueError(f"not a stock LlamaIndex engine: {name!r}")
        self.name = name
        self.documents = documents
        self.budget = budget
        self.encoder = encoder
        self.lexical = name.startswith("llamaindex-topk")
        self._docs: dict[str, tuple[dict[int, str], BaseRetriever | None]] = {}

    def _load(self, doc_id: str) -> tuple[dict[int, str], BaseRetriever | None]:
        if doc_id in self._docs:
            return self._docs[doc_id]
        from llama_index.core.node_parser import SentenceSplitter

        documents = self.documents(doc_id)
        page_text = {int(d.metadata["source"]): d.get_content() for d in documents}
        nodes = SentenceSplitter().get_nodes_from_documents(documents)
        for position, node in enumerate(nodes):
            node.metadata["chunk"] = position
        retriever = (
            chunk_retriever(nodes, lexical=self.lexical, top_k=len(nodes), encoder=self.encoder)
            if nodes
            else None
        )
        self._docs[doc_id] = (page_text, retriever)
        return self._docs[doc_id]

    def ranked_pages(self, item: QAItem) -> list[int]:
        """The pages this pipeline reads for ``item``, in order."""
        _, retriever = self._load(item.doc_id)
        if retriever is None:
            return []
        found: list[NodeWithScore] = retriever.retrieve(item.question)
        chunks = [
            (int(n.node.metadata["source"]), float(n.score or 0.0), int(n.node.metadata["chunk"]))
            for n in found
        ]
        return pages_of_chunks(chunks, self.budget)

    def run(self, item: QAItem, reader: Reader) -> EngineOutput:
        start = time.perf_counter()
        pages = self.ranked_pages(item)
        page_text, _ = self._load(item.doc_id)
        if not pages:
            return EngineOutput(QuestionRun(self.name, item.qid, reads=[[]], status="no_text"))
        refs = [PageRef(item.doc_id, page) for page in pages]
        with counting_llm_calls() as tally:
            feedback = reader.read(
                ReaderInput(
                    question=item.question,
                    query=item.question,
                    pages=[PageView(ref=ref, text=page_text.get(ref.page, "")) for ref in refs],
                    round=1,
                    final_round=True,
                    pages_in_scope=len(page_text),
                )
            )
        return EngineOutput(
            QuestionRun(
                engine=self.name,
                qid=item.qid,
                reads=[refs],
                useful=[ref for ref in feedback.useful_pages if ref in refs],
                answer=feedback.answer,
                status=feedback.status,
                stop_reason="static",
                llm_calls=tally.calls,
                seconds=time.perf_counter() - start,
            )
        )


def stock_engine(
    name: str, *, pdf_dir: Path, store: PageStore, budget: int, encoder: PageEncoder
) -> StockLlamaIndexEngine:
    """The stock pipeline ``name``: over the PDFs' text layer, or over the store's text (``-ocr``)."""
    documents = store_documents(store) if name.endswith("-ocr") else pdf_documents(pdf_dir)
    return StockLlamaIndexEngine(name, documents, budget=budget, encoder=encoder)
