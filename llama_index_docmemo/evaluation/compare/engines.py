"""The engines ``docmemo compare`` runs, all answering with the same LlamaIndex LLM.

- ``docmemo``: :class:`~llama_index_docmemo.DocMemoQueryEngine` over the page store (OCR'd pages
  included), at most ``pages`` pages a question.
- ``stock``: what a LlamaIndex user builds: ``SimpleDirectoryReader`` (pypdf's text layer, no OCR)
  -> ``SentenceSplitter`` (defaults) -> ``VectorStoreIndex`` over this package's CPU encoder
  (:class:`~llama_index_docmemo.encoders.EncoderEmbedding`) -> ``RetrieverQueryEngine``.
- ``stock-bm25``: the same with LlamaIndex's ``BM25Retriever``.
- ``stock-ocr`` / ``stock-bm25-ocr``: the same two over the page store's text, which holds
  Tesseract's text of the pages without a text layer, so a comparison separates the method from OCR.

The stock engines retrieve ``top_k`` chunks, chosen so that their tokens match DocMemo's page
budget in tokens (``pages`` x the mean page's tokens), which :attr:`CompareEngine.budget` states.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.llamaindex_pipeline import chunk_retriever
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRef

if TYPE_CHECKING:
    from llama_index.core.llms import LLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import BaseNode, Document

    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.store.base import PageStore

DOCMEMO = "docmemo"
STOCK_ENGINES = ("stock", "stock-bm25", "stock-ocr", "stock-bm25-ocr")
COMPARE_ENGINES = (DOCMEMO, *STOCK_ENGINES)
DEFAULT_ENGINES = (DOCMEMO, "stock")


@dataclass
class EngineReply:
    """One engine's answer: the text, the pages it cites, the pages it read, DocMemo's trace."""

    answer: str
    cited: list[PageRef]
    read: list[PageRef]
    trace: QueryTrace | None = None


class CompareEngine(ABC):
    """An engine under comparison: a question in, an :class:`EngineReply` out."""

    name: str
    budget: str  # what it may read, in words, for the report

    @abstractmethod
    def answer(self, question: str) -> EngineReply:
        """Answer ``question`` over every document."""


def _unique(refs: Sequence[PageRef]) -> list[PageRef]:
    return list(dict.fromkeys(refs))


class DocMemoEngine(CompareEngine):
    """DocMemo's query engine; cited pages are its evidence nodes, read pages its trace's."""

    name = DOCMEMO

    def __init__(self, engine: DocMemoQueryEngine, budget: str) -> None:
        self.engine = engine
        self.budget = budget

    def answer(self, question: str) -> EngineReply:
        from llama_index_docmemo.nodes import is_page, node_ref

        response = self.engine.query(question)
        trace = QueryTrace.model_validate((response.metadata or {})["docmemo"])
        return EngineReply(
            answer=str(response.response or ""),
            cited=_unique([node_ref(n) for n in response.source_nodes if is_page(n)]),
            read=_unique([PageRef(p.doc_id, p.page) for p in trace.pages_read]),
            trace=trace,
        )


class StockEngine(CompareEngine):
    """A ``RetrieverQueryEngine`` over chunks; the chunks it answered from are what it read and
    cites (their pages)."""

    def __init__(
        self, name: str, engine: RetrieverQueryEngine, page_of: dict[str, PageRef], budget: str
    ) -> None:
        self.name = name
        self.engine = engine
        self.page_of = page_of
        self.budget = budget

    def answer(self, question: str) -> EngineReply:
        response = self.engine.query(question)
        pages = _unique(
            [self.page_of[n.node.ref_doc_id] for n in response.source_nodes if n.node.ref_doc_id]
        )
        return EngineReply(answer=str(response.response or ""), cited=pages, read=pages)


def folder_documents(docs: Path) -> tuple[list[Document], dict[str, PageRef]]:
    """The PDFs of ``docs`` as ``SimpleDirectoryReader`` reads them (one Document a page), and
    each Document's page under the store's document ids (paths relative to ``docs``)."""
    from llama_index.core import SimpleDirectoryReader

    reader = SimpleDirectoryReader(input_dir=str(docs), recursive=True, required_exts=[".pdf"])
    documents = reader.load_data()
    root = docs.resolve()
    page_of: dict[str, PageRef] = {}
    pages_so_far: dict[str, int] = {}
    for document in documents:  # a file's pages come in order, one Document each
        doc_id = Path(document.metadata["file_path"]).resolve().relative_to(root).as_posix()
        pages_so_far[doc_id] = pages_so_far.get(doc_id, 0) + 1
        page_of[document.id_] = PageRef(doc_id, pages_so_far[doc_id])
    return documents, page_of


def store_documents(store: PageStore) -> tuple[list[Document], dict[str, PageRef]]:
    """The store's pages (OCR text included) as Documents with ``SimpleDirectoryReader``'s keys."""
    from llama_index.core.schema import Document

    documents: list[Document] = []
    page_of: dict[str, PageRef] = {}
    scope = PageFilter()
    for schema in store.list_documents(scope):
        refs = [PageRef(schema.doc_id, p) for p in range(1, schema.n_pages + 1)]
        for record in store.get_pages(refs, scope):
            document = Document(
                text=record.text,
                metadata={
                    "page_label": str(record.page),
                    "file_name": Path(record.source).name,
                    "file_path": record.source,
                },
            )
            documents.append(document)
            page_of[document.id_] = record.ref
    return documents, page_of


def mean_tokens(texts: Sequence[str]) -> float:
    """Mean length in tokens (LlamaIndex's tokenizer) of non-empty texts."""
    from llama_index.core.utils import get_tokenizer

    tokenize = get_tokenizer()
    counts = [len(tokenize(t)) for t in texts if t.strip()]
    return sum(counts) / len(counts) if counts else 0.0


def page_budget_tokens(store: PageStore, pages: int) -> tuple[float, float]:
    """(mean tokens of a page with text in the store, ``pages`` x that): DocMemo's budget."""
    documents, _ = store_documents(store)
    per_page = mean_tokens([d.text for d in documents])
    return per_page, pages * per_page


def stock_engine(
    name: str,
    *,
    docs: Path,
    store: PageStore,
    encoder: PageEncoder,
    llm: LLM,
    budget_tokens: float,
) -> StockEngine:
    """One of :data:`STOCK_ENGINES`, its ``top_k`` matched to ``budget_tokens``."""
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.query_engine import RetrieverQueryEngine

    if name not in STOCK_ENGINES:
        raise ValueError(f"not a stock engine: {name!r}; choose from {', '.join(STOCK_ENGINES)}")
    documents, page_of = store_documents(store) if name.endswith("-ocr") else folder_documents(docs)
    nodes: list[BaseNode] = SentenceSplitter().get_nodes_from_documents(documents)
    nodes = [n for n in nodes if n.get_content().strip()]
    if not nodes:
        raise DocMemoError(f"{name}: no text in {docs} to index (image-only PDFs need stock-ocr)")
    chunk = mean_tokens([n.get_content() for n in nodes])
    top_k = min(len(nodes), max(1, round(budget_tokens / chunk))) if chunk else 1
    retriever = chunk_retriever(nodes, lexical="bm25" in name, top_k=top_k, encoder=encoder)
    source = (
        "the page store's text (OCR included)" if name.endswith("-ocr") else "pypdf's text layer"
    )
    budget = (
        f"top {top_k} of {len(nodes)} chunks (mean {chunk:.0f} tokens, {top_k * chunk:,.0f} "
        f"tokens), from {source}"
    )
    return StockEngine(name, RetrieverQueryEngine.from_args(retriever, llm=llm), page_of, budget)


def docmemo_engine(
    *, store: PageStore, encoder: PageEncoder, llm: LLM, config: DocMemoConfig, budget: str
) -> DocMemoEngine:
    """DocMemo reading with ``llm`` under ``config`` (whose page budget ``budget`` states)."""
    from llama_index_docmemo.query_engine import DocMemoQueryEngine

    engine = DocMemoQueryEngine.from_defaults(store=store, encoder=encoder, llm=llm, config=config)
    return DocMemoEngine(engine, budget)
