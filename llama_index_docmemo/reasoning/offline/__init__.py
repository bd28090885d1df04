"""The offline reader in three modules: ``question`` (what a question asks: its key terms, their
weights, the kind of answer), ``passages`` (page text cut into sentences and table rows, scored
and labelled against the question, and the passages shown) and ``reasoner`` (the
:class:`OfflineReasoner`: answer extraction, the strong-evidence "unanswerable" rule, feedback)."""

from llama_index_docmemo.reasoning.offline.reasoner import OfflineReasoner

__all__ = ["OfflineReasoner"]
