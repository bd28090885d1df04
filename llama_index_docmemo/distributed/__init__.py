"""Ingestion past one machine: :class:`RayExecutor` (extra ``ray``; Ray is imported only when a
batch runs on it)."""

from llama_index_docmemo.distributed.ray_executor import RayExecutor

__all__ = ["RayExecutor"]
