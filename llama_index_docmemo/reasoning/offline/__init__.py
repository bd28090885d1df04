"""The offline reader, by concern: question analysis, page units and tables, labelling, answer
extraction, the strong-evidence "unanswerable" rule, passages, and the :class:`OfflineReasoner`."""

from llama_index_docmemo.reasoning.offline.reasoner import OfflineReasoner

__all__ = ["OfflineReasoner"]
