"""Qdrant page store: one point per page, two backends (Qdrant Edge, qdrant-client) behind one interface."""

from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.client import QdrantClientPageStore
from llama_index_docmemo.store.edge import EdgePageStore
from llama_index_docmemo.store.factory import open_store

__all__ = ["EdgePageStore", "PageStore", "QdrantClientPageStore", "open_store"]
