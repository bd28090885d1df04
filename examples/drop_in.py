"""Drop-in: a stock LlamaIndex app over a folder of PDFs switches to DocMemo by changing one line.

    python examples/drop_in.py path/to/folder "What was the revenue in 2023?"
    DOCMEMO_LLM_URL=http://127.0.0.1:8000/v1 DOCMEMO_LLM_MODEL=Qwen/Qwen2.5-VL-7B-Instruct \\
        python examples/drop_in.py path/to/folder "What was the revenue in 2023?"

The app below is LlamaIndex's own quickstart: read the folder, build an index, ask its query
engine. ``app(VectorStoreIndex, ...)`` runs it as it was; ``app(DocMemoIndex, ...)`` is the same
app with the one line changed. Both use the app's ``Settings``: its LLM (an OpenAI-compatible
server here when ``DOCMEMO_LLM_URL`` is set; without one, the stock engine gets LlamaIndex's
``MockLLM`` and DocMemo reads with its offline reader, saying so) and, for the stock index, its
embedding model (this package's CPU encoder, so that no API key or download is needed).
"""

from __future__ import annotations

import os
import sys
import tempfile

from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex

from llama_index_docmemo import DocMemoIndex, EncoderEmbedding, QwenVL


def app(index_class: type, folder: str, question: str) -> None:
    """The application: unchanged whichever index class it is given."""
    documents = SimpleDirectoryReader(folder, recursive=True, required_exts=[".pdf"]).load_data()
    index = index_class.from_documents(documents)
    response = index.as_query_engine().query(question)
    print(f"[{index_class.__name__}] {str(response)[:300]}")
    for node in response.source_nodes[:5]:
        meta = node.node.metadata
        print(f"   source: {meta.get('file_name')} p.{meta.get('page_label')}")


def configure_app() -> None:
    """The app's own settings, once for all of LlamaIndex."""
    url = os.environ.get("DOCMEMO_LLM_URL")
    if url:
        Settings.llm = QwenVL(model=os.environ.get("DOCMEMO_LLM_MODEL", "default"), api_base=url)
    else:
        Settings.llm = None  # LlamaIndex's MockLLM: no model to answer with
    Settings.embed_model = EncoderEmbedding()


def main(folder: str, question: str) -> None:
    configure_app()
    os.environ.setdefault("DOCMEMO_STORE_DIR", tempfile.mkdtemp(prefix="docmemo-store-"))
    app(VectorStoreIndex, folder, question)  # before
    app(DocMemoIndex, folder, question)  # after: the one line that changed


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
