"""llama-index-docmemo: DocMemo retrieval (page beliefs, schema and episodic memory) for LlamaIndex.

Public names are imported lazily, so ``import llama_index_docmemo`` stays light and optional
backends (torch for ColQwen, MinerU) are only imported when used.
"""

from __future__ import annotations

from importlib import import_module

from llama_index_docmemo.lazy import lazy_exports

__version__ = "0.2.0"

_EXPORTS: dict[str, str] = {
    "DocMemoIndex": "llama_index_docmemo.index",
    "DocMemoQueryEngine": "llama_index_docmemo.query_engine",
    "DocMemoResult": "llama_index_docmemo.loop",
    "DocMemoRunner": "llama_index_docmemo.loop",
    "DocMemoRetriever": "llama_index_docmemo.retriever",
    "DocMemoConfig": "llama_index_docmemo.config",
    "LoopSettings": "llama_index_docmemo.config",
    "SelectionSettings": "llama_index_docmemo.config",
    "LeverSettings": "llama_index_docmemo.config",
    "DocumentSettings": "llama_index_docmemo.config",
    "BudgetSettings": "llama_index_docmemo.config",
    "PageBeliefMemory": "llama_index_docmemo.memory.belief",
    "DocumentBeliefMemory": "llama_index_docmemo.memory.documents",
    "EpisodicMemory": "llama_index_docmemo.memory.episodic",
    "SchemaMemory": "llama_index_docmemo.memory.schema",
    "DocumentSchema": "llama_index_docmemo.memory.schema",
    "Feedback": "llama_index_docmemo.types",
    "EvidenceNote": "llama_index_docmemo.types",
    "Reader": "llama_index_docmemo.readers.base",
    "ReaderInput": "llama_index_docmemo.readers.base",
    "OfflineReader": "llama_index_docmemo.readers.offline",
    "VLMReader": "llama_index_docmemo.readers.vlm",
    "LLMReranker": "llama_index_docmemo.postprocessors.rerank",
    "QwenVL": "llama_index_docmemo.llms.qwen_vl",
    "OpenAICompatible": "llama_index_docmemo.llms.openai_compatible",
    "ServerMemory": "llama_index_docmemo.llms.servers",
    "PageEncoder": "llama_index_docmemo.encoders.base",
    "default_encoder": "llama_index_docmemo.encoders",
    "load_encoder": "llama_index_docmemo.encoders",
    "default_store_dir": "llama_index_docmemo.paths",
    "EncoderEmbedding": "llama_index_docmemo.encoders.embedding",
    "ColQwenEncoder": "llama_index_docmemo.encoders.colqwen",
    "CropPostprocessor": "llama_index_docmemo.postprocessors.crops",
    "DocumentIndexer": "llama_index_docmemo.indexing",
    "RayExecutor": "llama_index_docmemo.distributed",
    "IndexReport": "llama_index_docmemo.indexing",
    "PageStore": "llama_index_docmemo.store.base",
    "EdgePageStore": "llama_index_docmemo.store.edge",
    "QdrantClientPageStore": "llama_index_docmemo.store.client",
    "open_store": "llama_index_docmemo.store.factory",
    "PageRef": "llama_index_docmemo.types",
    "PageFilter": "llama_index_docmemo.store.scope",
    "to_page_filter": "llama_index_docmemo.store.scope",
    "QueryTrace": "llama_index_docmemo.trace",
    "decide_images": "llama_index_docmemo.llms.vision",
    "deadline_scope": "llama_index_docmemo.llms.wire",
    "counting_llm_calls": "llama_index_docmemo.events",
    "DocMemoRoundStartEvent": "llama_index_docmemo.events",
    "DocMemoRoundEndEvent": "llama_index_docmemo.events",
    "DocMemoError": "llama_index_docmemo.errors",
    "DocumentIdentityError": "llama_index_docmemo.errors",
    "DocumentRejectedError": "llama_index_docmemo.errors",
    "IngestError": "llama_index_docmemo.errors",
    "LLMError": "llama_index_docmemo.errors",
    "MalformedReplyError": "llama_index_docmemo.errors",
    "MissingExtraError": "llama_index_docmemo.errors",
    "QuestionError": "llama_index_docmemo.errors",
    "StoreError": "llama_index_docmemo.errors",
    "NoStoreError": "llama_index_docmemo.errors",
    "FilterError": "llama_index_docmemo.store.scope",
    "IdentityError": "llama_index_docmemo.store.scope",
    "ContextWindowError": "llama_index_docmemo.llms.context",
}

__all__ = sorted(_EXPORTS)


_exported, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


def __getattr__(name: str) -> object:
    reasoning = import_module(f"{__name__}.reasoning")  # the deprecated 0.2 names of the readers
    if name in reasoning.RENAMED:
        return reasoning.moved(name, stacklevel=2)  # warns on each use, never cached
    return _exported(name)
