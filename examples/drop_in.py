"""Drop-in: an app written against LlamaIndex's query-engine interface switches from a stock
``RetrieverQueryEngine`` to ``DocMemoQueryEngine`` by changing the construction only.

    python examples/drop_in.py path/to/report.pdf "What was the revenue in 2023?"
"""

from __future__ import annotations

import sys
from pathlib import Path

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo import DocMemoQueryEngine, DocumentIndexer
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.store import open_store


def app(query_engine: BaseQueryEngine, question: str) -> None:
    """The application: unchanged whichever engine it is given."""
    response = query_engine.query(question)
    print(f"[{type(query_engine).__name__}] {str(response)[:300]}")
    for node in response.source_nodes:
        print(f"   source: {node.node.metadata.get('doc_id')} p.{node.node.metadata.get('page')}")


class TopKPages(BaseRetriever):
    """The app's existing retriever: plain top-k pages from the same store."""

    def __init__(self, store, encoder, k: int = 5) -> None:
        super().__init__()
        self.store, self.encoder, self.k = store, encoder, k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        from llama_index_docmemo.nodes import page_node

        hits = self.store.search(self.encoder.encode_query(query_bundle.query_str), limit=self.k)
        return [NodeWithScore(node=page_node(h.record), score=h.score) for h in hits]


def main(pdf: str, question: str) -> None:
    encoder = default_encoder()
    with open_store(path=Path("./docmemo_store"), encoder=encoder) as store:
        DocumentIndexer(store, encoder).index_paths([Path(pdf)])

        # Before: a stock engine (MockLLM stands in for the app's LLM so this runs offline).
        before = RetrieverQueryEngine.from_args(TopKPages(store, encoder), llm=MockLLM())
        app(before, question)

        # After: only the construction changes.
        after = DocMemoQueryEngine.from_defaults(store=store, encoder=encoder)
        app(after, question)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
