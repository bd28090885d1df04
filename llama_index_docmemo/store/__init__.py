"""Qdrant page store: one point per page, two backends (Qdrant Edge, qdrant-client) behind one interface.

Backends are imported on first use: an embedded-only process never loads qdrant-client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index_docmemo.store.base import PageStore
    from llama_index_docmemo.store.client import QdrantClientPageStore
    from llama_index_docmemo.store.edge import EdgePageStore
    from llama_index_docmemo.store.factory import open_store
    from llama_index_docmemo.store.layouts import MultivectorLayout

_EXPORTS: dict[str, str] = {
    "EdgePageStore": "llama_index_docmemo.store.edge",
    "MultivectorLayout": "llama_index_docmemo.store.layouts",
    "PageStore": "llama_index_docmemo.store.base",
    "QdrantClientPageStore": "llama_index_docmemo.store.client",
    "open_store": "llama_index_docmemo.store.factory",
}

__all__ = ["EdgePageStore", "MultivectorLayout", "PageStore", "QdrantClientPageStore", "open_store"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
