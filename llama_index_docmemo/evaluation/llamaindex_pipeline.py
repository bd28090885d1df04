"""Stock LlamaIndex pipelines as their users build them, for the ``llamaindex-*`` baselines.

``PyMuPDFReader`` (one Document per page, text layer only: no OCR) -> ``SentenceSplitter`` with its
defaults -> a chunk retriever:

- ``llamaindex-topk``: ``BM25Retriever.from_defaults`` (bm25s, English stemmer and stop words);
- ``llamaindex-vector``: a ``VectorStoreIndex`` whose embedding is this package's CPU encoder's pooled
  vector (:class:`EncoderEmbedding`), so it is the same encoder DocMemo searches with.

The pages of the retrieved chunks, in chunk order, are what the engine reads, until the page budget
(T x k) is reached; the evaluation's reader then reads those pages once. Nothing here sees the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo._extras import require
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.evaluation.baselines import EngineOutput, EvalEngine
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.reasoning.base import PageView, Reasoner, ReasoningInput
from llama_index_docmemo.types import PageRef

if TYPE_CHECKING:
    from llama_index.core.schema import BaseNode, NodeWithScore


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


def _embedding_class() -> Any:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class EncoderEmbedding(BaseEmbedding):
        """A :class:`PageEncoder`'s pooled query vector as a LlamaIndex embedding model."""

        _encoder: Any = PrivateAttr()

        def __init__(self, encoder: PageEncoder, **kwargs: Any) -> None:
            super().__init__(model_name=encoder.name, **kwargs)
            self._encoder = encoder

        def _vectors(self, texts: list[str]) -> list[list[float]]:
            return [[float(v) for v in e.pooled] for e in self._encoder.encode_queries(texts)]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vectors([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vectors([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._vectors(texts)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return EncoderEmbedding


class StockLlamaIndexEngine(EvalEngine):
    """A stock LlamaIndex chunk retriever over one document's PDF, read once up to ``budget`` pages.

    Args:
        name: ``llamaindex-topk`` (BM25) or ``llamaindex-vector`` (VectorStoreIndex).
        pdf_dir: the dataset's ``pdfs/`` folder.
        budget: pages to read (T x k).
        encoder: the embedding of ``llamaindex-vector``.
    """

    def __init__(
        self, name: str, pdf_dir: Path, *, budget: int, encoder: PageEncoder | None = None
    ) -> None:
        if name not in ("llamaindex-topk", "llamaindex-vector"):
            raise ValueError(f"not a stock LlamaIndex engine: {name!r}")
        if name == "llamaindex-vector" and encoder is None:
            raise ValueError("llamaindex-vector needs an encoder")
        self.name = name
        self.pdf_dir = Path(pdf_dir)
        self.budget = budget
        self.encoder = encoder
        self._docs: dict[str, tuple[list[BaseNode], dict[int, str], Any]] = {}

    def _load(self, doc: str) -> tuple[list[BaseNode], dict[int, str], Any]:
        if doc in self._docs:
            return self._docs[doc]
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.readers.file import PyMuPDFReader

        documents = PyMuPDFReader().load_data(self.pdf_dir / doc)
        page_text = {int(d.metadata["source"]): d.get_content() for d in documents}
        nodes = SentenceSplitter().get_nodes_from_documents(documents)
        for position, node in enumerate(nodes):
            node.metadata["chunk"] = position
        retriever: Any = None
        if nodes:
            if self.name == "llamaindex-topk":
                bm25 = require(
                    "llama_index.retrievers.bm25",
                    extra="eval",
                    feature="the llamaindex-topk engine",
                )
                logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import
                retriever = bm25.BM25Retriever.from_defaults(
                    nodes=nodes, similarity_top_k=len(nodes)
                )
            else:
                from llama_index.core import VectorStoreIndex

                index = VectorStoreIndex(nodes, embed_model=_embedding_class()(self.encoder))
                retriever = index.as_retriever(similarity_top_k=len(nodes))
        self._docs[doc] = (nodes, page_text, retriever)
        return self._docs[doc]

    def ranked_pages(self, item: QAItem) -> list[int]:
        """The pages this pipeline reads for ``item``, in order."""
        nodes, _, retriever = self._load(item.doc)
        if retriever is None:
            return []
        found: list[NodeWithScore] = retriever.retrieve(item.question)
        chunks = [
            (int(n.node.metadata["source"]), float(n.score or 0.0), int(n.node.metadata["chunk"]))
            for n in found
        ]
        return pages_of_chunks(chunks, self.budget)

    def run(self, item: QAItem, reasoner: Reasoner) -> EngineOutput:
        start = time.perf_counter()
        pages = self.ranked_pages(item)
        _, page_text, _ = self._load(item.doc)
        if not pages:
            return EngineOutput(QuestionRun(self.name, item.qid, reads=[[]], status="no_text"))
        refs = [PageRef(item.doc, page) for page in pages]
        feedback = reasoner.reason(
            ReasoningInput(
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
                llm_calls=feedback.llm_calls,
                seconds=time.perf_counter() - start,
            )
        )


def stock_engine(
    name: str, pdf_dir: Path, *, budget: int, encoder: PageEncoder | None
) -> StockLlamaIndexEngine:
    """The stock pipeline ``name`` over ``pdf_dir``."""
    return StockLlamaIndexEngine(name, pdf_dir, budget=budget, encoder=encoder)
