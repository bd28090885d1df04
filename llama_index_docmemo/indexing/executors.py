"""Who runs the indexing steps: this process (the default), or a cluster (``distributed``).

An executor turns the batch's jobs into one :class:`~.stages.DocumentOutcome` per job, in any
order; the indexer turns the outcomes into the report. When an outcome says the store refused a
write, the indexer stops reading outcomes and closes the iterator (an executor releases its
workers in ``finally``), and every job without an outcome is reported as not attempted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

from llama_index_docmemo.errors import DocMemoError, StoreError
from llama_index_docmemo.indexing.stages import (
    DocumentJob,
    DocumentOutcome,
    encode_document,
    failure,
    prepare_document,
    write_document,
)
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS

if TYPE_CHECKING:
    from llama_index_docmemo.indexing.indexer import DocumentIndexer

ENCODE_ERRORS: tuple[type[Exception], ...] = (DocMemoError, ValueError, OSError, *RENDER_ERRORS)
"""What an encoder raises for one bad document (a page it cannot render or read, MuPDF's errors
of a damaged file, the file gone): that document fails, the batch goes on."""


class IndexExecutor(ABC):
    """Runs :mod:`.stages` for every job of a batch."""

    @abstractmethod
    def run(
        self, jobs: Sequence[DocumentJob], indexer: DocumentIndexer
    ) -> Generator[DocumentOutcome, None, None]:
        """One outcome per job, in any order; the indexer may stop early (see module doc)."""


class SerialExecutor(IndexExecutor):
    """Each document in turn in this process: parse, OCR (over local processes), encode, write."""

    def run(
        self, jobs: Sequence[DocumentJob], indexer: DocumentIndexer
    ) -> Generator[DocumentOutcome, None, None]:
        for job in jobs:
            prepared = prepare_document(job, ocr=indexer.ocr_engine, summarizer=indexer.summarizer)
            if isinstance(prepared, DocumentOutcome):
                yield prepared
                continue
            try:
                embeddings = encode_document(
                    prepared,
                    indexer.encoder,
                    batch_size=indexer.batch_size,
                    image_long_side=indexer.image_long_side,
                    layout=indexer.store.layout,
                )
            except ENCODE_ERRORS as exc:
                yield failure(job, f"cannot encode: {exc}")
                continue
            try:
                yield write_document(indexer.store, prepared, embeddings)
            except StoreError as exc:
                yield failure(job, str(exc), store_failed=True)
