"""What runs inside Ray workers: the parse task and the encoder actor (plain Python, no Ray import).

:class:`~.ray_executor.RayExecutor` wraps these with ``ray.remote`` when it starts, so this
module stays importable (and testable) without the extra. Each piece runs the same
:mod:`llama_index_docmemo.indexing.stages` as the serial indexer, so a document comes out the same
whichever process handled it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from llama_index_docmemo.errors import DocMemoError, StoreError
from llama_index_docmemo.indexing.executors import ENCODE_ERRORS
from llama_index_docmemo.indexing.stages import (
    DocumentJob,
    DocumentOutcome,
    PreparedDocument,
    Summarizer,
    encode_document,
    failure,
    prepare_document,
    write_document,
)
from llama_index_docmemo.types import PageEmbedding

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.ingest.ocr import OcrEngine
    from llama_index_docmemo.store.client import QdrantClientPageStore
    from llama_index_docmemo.store.layouts import MultivectorLayout

EncoderFactory = Callable[[], "PageEncoder"]
"""Builds the page encoder inside a worker (where its weights and GPU are); picklable."""


def prepare_task(
    job: DocumentJob, ocr: OcrEngine | None, summarizer: Summarizer | None
) -> tuple[DocumentOutcome | None, PreparedDocument | None]:
    """(outcome, None) when the job ends at parsing (unchanged, bad file), else (None, prepared).

    Two results, so the driver reads the small first one and hands the second (page texts)
    to an encoder actor without fetching it. OCR runs in this process: Ray spreads documents
    over the cluster's cores instead.
    """
    prepared = prepare_document(job, ocr=ocr, summarizer=summarizer, ocr_workers=1)
    if isinstance(prepared, DocumentOutcome):
        return prepared, None
    return None, prepared


@dataclass
class EncodedDocument:
    """An encoder actor's answer for the single writer: embeddings and the document's timings."""

    embeddings: list[PageEmbedding]
    seconds: dict[str, float]


class EncodeWorker:
    """An encoder actor: renders and encodes documents; with a server store, writes them too.

    Args:
        encoder_factory: builds the encoder once per actor (and again after a restart).
        encoder_name: the name the store was created with; another encoder is refused.
        batch_size / image_long_side: as for :class:`~llama_index_docmemo.DocumentIndexer`.
        store_options: keyword arguments of :class:`QdrantClientPageStore` to write through
            (None: the driver writes, an embedded store has one writer).
        write_retry_seconds: how long a refused write is retried, with backoff, before the
            document fails.
        layout: the store's multivector layout: the actor computes each page's stored vectors
            (token pooling, MUVERA) beside its encoder, so the driver writing an embedded store
            only upserts.

    Two documents may be in the actor at once: one is encoded (one at a time, a lock) while
    the other is written, so the encoder does not wait for the network.
    """

    def __init__(
        self,
        encoder_factory: EncoderFactory,
        encoder_name: str,
        *,
        batch_size: int,
        image_long_side: int,
        store_options: dict[str, Any] | None,
        write_retry_seconds: float,
        layout: MultivectorLayout | None = None,
    ) -> None:
        self.encoder = encoder_factory()
        if self.encoder.name != encoder_name:
            raise DocMemoError(
                f"the Ray workers built encoder {self.encoder.name!r}, the store holds "
                f"{encoder_name!r}: pass an encoder factory that builds the store's encoder"
            )
        self.batch_size = batch_size
        self.image_long_side = image_long_side
        self.write_retry_seconds = write_retry_seconds
        self.layout = layout
        self._encoding = threading.Lock()
        self._store: QdrantClientPageStore | None = None
        if store_options is not None:
            from llama_index_docmemo.store.client import QdrantClientPageStore

            self._store = QdrantClientPageStore(**store_options)

    def encoder_name(self) -> str:
        """The encoder's name (the driver waits on it: the actor is up)."""
        return self.encoder.name

    def _encoded(self, prepared: PreparedDocument) -> list[PageEmbedding] | DocumentOutcome:
        try:
            with self._encoding:
                return encode_document(
                    prepared,
                    self.encoder,
                    batch_size=self.batch_size,
                    image_long_side=self.image_long_side,
                    layout=self.layout,
                )
        except ENCODE_ERRORS as exc:
            return failure(prepared.job, f"cannot encode: {exc}")

    def encode(self, prepared: PreparedDocument) -> EncodedDocument | DocumentOutcome:
        """Embeddings for the driver to write (embedded store), or the failure."""
        embeddings = self._encoded(prepared)
        if isinstance(embeddings, DocumentOutcome):
            return embeddings
        return EncodedDocument(embeddings, prepared.seconds)

    def encode_and_write(self, prepared: PreparedDocument) -> DocumentOutcome:
        """Encode, then write to the server (retrying refusals); the document's outcome."""
        if self._store is None:
            raise DocMemoError("this encoder actor has no server store to write to")
        embeddings = self._encoded(prepared)
        if isinstance(embeddings, DocumentOutcome):
            return embeddings
        store = self._store
        retrying = Retrying(
            retry=retry_if_exception_type(StoreError),
            wait=wait_exponential(multiplier=0.5, max=8),
            stop=stop_after_delay(self.write_retry_seconds),
            reraise=True,
        )
        try:
            return retrying(write_document, store, prepared, embeddings)
        except StoreError as exc:
            return failure(prepared.job, str(exc), store_failed=True)
