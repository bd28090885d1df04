"""Drop-in: an app written against LlamaIndex's query-engine interface switches from a stock
``RetrieverQueryEngine`` to ``DocMemoQueryEngine`` by changing the construction only, and
keeps its own LLM: both engines use ``Settings.llm`` (DocMemo reads the pages with it).

    python examples/drop_in.py path/to/report.pdf "What was the revenue in 2023?"
    DOCMEMO_LLM_URL=http://127.0.0.1:8000/v1 DOCMEMO_LLM_MODEL=Qwen/Qwen2.5-VL-7B-Instruct \\
        python examples/drop_in.py path/to/report.pdf "What was the revenue in 2023?"

Without ``DOCMEMO_LLM_URL`` the app has no LLM: the stock engine gets LlamaIndex's MockLLM and
DocMemo reads with its offline reader (and says so in the log).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from llama_index.core import Settings
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo import DocMemoQueryEngine, DocumentIndexer
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.nodes import page_node
from llama_index_docmemo.store import open_store


def app(query_engine: BaseQueryEngine, question: str) -> None:
    """The application: unchanged whichever engine it is given."""
    response = query_engine.query(question)
    print(f"[{type(query_engine).__name__}] {str(response)[:300]}")
    for node in response.source_nodes:
        meta = node.node.metadata
        print(f"   source: {meta.get('file_name')} p.{meta.get('page_label')}")


class TopKPages(BaseRetriever):
    """The app's existing retriever: plain top-k pages from the same store."""

    def __init__(self, store, encoder, k: int = 5) -> None:
        super().__init__()
        self.store, self.encoder, self.k = store, encoder, k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.store.search(self.encoder.encode_query(query_bundle.query_str), limit=self.k)
        return [NodeWithScore(node=page_node(h.record), score=h.score) for h in hits]


def configure_app_llm() -> None:
    """The app's own LLM, set once for all of LlamaIndex (an OpenAI-compatible server here)."""
    url = os.environ.get("DOCMEMO_LLM_URL")
    if url:
        from llama_index_docmemo.llms import QwenVL

        Settings.llm = QwenVL(model=os.environ.get("DOCMEMO_LLM_MODEL", "default"), api_base=url)


def engines(store, encoder) -> tuple[BaseQueryEngine, BaseQueryEngine]:
    """Before and after: the same app LLM (``Settings.llm``) in both."""
    from llama_index.core.llms import MockLLM

    llm = Settings._llm or MockLLM()  # without an app LLM, the stock engine gets a mock
    before = RetrieverQueryEngine.from_args(TopKPages(store, encoder), llm=llm)
    after = DocMemoQueryEngine.from_defaults(store=store, encoder=encoder)  # Settings.llm reads
    return before, after


def main(pdf: str, question: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_app_llm()
    encoder = default_encoder()
    with open_store(path=Path("./docmemo_store"), encoder=encoder) as store:
        DocumentIndexer(store, encoder).index_paths([Path(pdf)])
        before, after = engines(store, encoder)
        app(before, question)
        app(after, question)  # only the construction changed


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
