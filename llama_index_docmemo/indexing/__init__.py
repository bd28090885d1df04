"""Indexing: documents in, searchable pages out.

:class:`DocumentIndexer` plans a batch (files, doc ids, the versions already stored), an
executor runs each document's steps (:mod:`.stages`: prepare, encode, write) in this process or
on a Ray cluster (:class:`llama_index_docmemo.distributed.RayExecutor`), and the outcomes become
one :class:`IndexReport`.
"""

from llama_index_docmemo.indexing.executors import IndexExecutor, SerialExecutor
from llama_index_docmemo.indexing.index_report import IndexReport
from llama_index_docmemo.indexing.indexer import DocumentIndexer
from llama_index_docmemo.indexing.stages import Summarizer, page_records

__all__ = [
    "DocumentIndexer",
    "IndexExecutor",
    "IndexReport",
    "SerialExecutor",
    "Summarizer",
    "page_records",
]
