"""The offline reader in three modules: ``question`` (what a question asks: its key terms, their
weights, the kind of answer), ``passages`` (page text cut into sentences and table rows, scored
and labelled against the question, and the passages shown) and ``reader`` (the
:class:`OfflineReader`: answer extraction, the strong-evidence "unanswerable" rule, feedback)."""

from llama_index_docmemo.readers.offline.reader import OfflineReader

__all__ = ["OfflineReader"]
