"""Quickstart: index PDFs into an embedded store and ask a question with the DocMemo loop.

    python examples/quickstart.py path/to/report.pdf "What was the revenue in 2023?"

No GPU, server or API key: Qdrant Edge in-process, the CPU encoder, the offline reader.
Set DOCMEMO_LLM_URL / DOCMEMO_LLM_MODEL to read pages with a Qwen-VL served by vLLM instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from llama_index_docmemo import DocMemoConfig, DocMemoQueryEngine, DocumentIndexer, QwenVL
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.store import open_store


def main(pdf: str, question: str, store_dir: str = "./docmemo_store") -> None:
    encoder = default_encoder()
    with open_store(path=Path(store_dir), encoder=encoder) as store:
        report = DocumentIndexer(store, encoder).index_paths([Path(pdf)])
        print(report.summary())
        llm = QwenVL() if os.environ.get("DOCMEMO_LLM_URL") else None
        engine = DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, llm=llm, config=DocMemoConfig(rounds=3, pages_per_round=5)
        )
        response = engine.query(question)
    print("Answer:", response.response)
    for node in response.source_nodes:
        meta = node.node.metadata
        print(f"  evidence: {meta['doc_id']} p.{meta['page']} (belief {node.score:.2f})")
    trace = response.metadata["docmemo"]
    print(f"rounds: {len(trace['rounds'])}, stop: {trace['stop_reason']}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
