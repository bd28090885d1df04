"""llama-index-docmemo: DocMemo retrieval (page beliefs, schema and episodic memory) for LlamaIndex.

Public names are imported lazily, so ``import llama_index_docmemo`` stays light and optional
backends (torch for ColQwen, MinerU) are only imported when used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "DocMemoQueryEngine": "llama_index_docmemo.query_engine",
    "DocMemoResult": "llama_index_docmemo.loop",
    "DocMemoLoop": "llama_index_docmemo.loop",
    "DocMemoRetriever": "llama_index_docmemo.retriever",
    "DocMemoConfig": "llama_index_docmemo.config",
    "PageBeliefMemory": "llama_index_docmemo.memory.belief",
    "EpisodicMemory": "llama_index_docmemo.memory.episodic",
    "SchemaMemory": "llama_index_docmemo.memory.schema",
    "DocumentSchema": "llama_index_docmemo.memory.schema",
    "Feedback": "llama_index_docmemo.types",
    "EvidenceNote": "llama_index_docmemo.types",
    "Reasoner": "llama_index_docmemo.reasoning.base",
    "ReasoningInput": "llama_index_docmemo.reasoning.base",
    "OfflineReasoner": "llama_index_docmemo.reasoning.offline",
    "VLMReasoner": "llama_index_docmemo.reasoning.vlm",
    "LLMReranker": "llama_index_docmemo.postprocessors.rerank",
    "QwenVL": "llama_index_docmemo.llms.qwen_vl",
    "PageEncoder": "llama_index_docmemo.encoders.base",
    "default_encoder": "llama_index_docmemo.encoders",
    "ColQwenEncoder": "llama_index_docmemo.encoders.colqwen",
    "CropPostprocessor": "llama_index_docmemo.postprocessors.crops",
    "DocumentIndexer": "llama_index_docmemo.indexing",
    "IndexReport": "llama_index_docmemo.indexing",
    "PageStore": "llama_index_docmemo.store.base",
    "EdgePageStore": "llama_index_docmemo.store.edge",
    "QdrantClientPageStore": "llama_index_docmemo.store.client",
    "open_store": "llama_index_docmemo.store.factory",
    "PageRef": "llama_index_docmemo.types",
    "PageFilter": "llama_index_docmemo.types",
    "to_page_filter": "llama_index_docmemo.store.filters",
    "QueryTrace": "llama_index_docmemo.trace",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llama_index_docmemo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
