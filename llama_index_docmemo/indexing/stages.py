"""The three steps of indexing one document, each runnable in any process.

``prepare_document`` (parse, OCR, schema, page records), ``encode_document`` (render, encode)
and ``write_document`` (the store's crash-safe upsert) take and return plain picklable data, so
an executor may run them in this process (:class:`~.executors.SerialExecutor`) or spread them
over a cluster (:class:`llama_index_docmemo.distributed.RayExecutor`) with the same result.
Every stage's seconds are recorded with the document (see :data:`.index_report.STAGES`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from llama_index_docmemo.errors import DocumentRejectedError, IngestError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.indexing.index_report import STAGES
from llama_index_docmemo.ingest.files import regular_file_problem
from llama_index_docmemo.ingest.ocr import OcrEngine
from llama_index_docmemo.ingest.parsed import ParsedDocument
from llama_index_docmemo.ingest.pdf import (
    RENDER_ERRORS,
    apply_ocr,
    file_sha256,
    read_pdf,
    render_page,
)
from llama_index_docmemo.ingest.structure import build_schema
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.step_runtime import cpu_pool
from llama_index_docmemo.store.metadata import metadata_digest
from llama_index_docmemo.store.points import lay_out
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRecord, PageRef

if TYPE_CHECKING:
    from PIL import Image

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.store.base import PageStore
    from llama_index_docmemo.store.layouts import MultivectorLayout

logger = logging.getLogger(__name__)

Summarizer = Callable[[DocumentSchema, Sequence[PageRecord]], Mapping[int, str]]
"""(schema, page records) -> page -> summary; pages it leaves out keep their first-line summary."""


@dataclass(frozen=True)
class StoredVersion:
    """What the store holds of a document before this batch: its version, ACL, source and the
    digest of its metadata."""

    version: str
    acl: tuple[str, ...]
    source: str
    metadata_digest: str = ""


@dataclass(frozen=True)
class DocumentJob:
    """One document to index: a PDF file (``path``) or a document already parsed (``parsed``).

    Args:
        label: how the report names it (the path as given, or the parsed document's source).
        stored: the version the store held when the batch was planned (None: a new document).
        metadata: the app's keys for every page of a ``path`` job (checked: ``docmemo index
            --meta``); a parsed document carries its own.
    """

    label: str
    doc_id: str
    tenant: str | None
    acl: tuple[str, ...]
    path: Path | None = None
    parsed: ParsedDocument | None = None
    stored: StoredVersion | None = None
    metadata: Mapping[str, object] = field(default_factory=dict)

    def metadata_digest(self) -> str:
        """The digest of what this job stores as metadata."""
        if self.parsed is not None:
            return _parsed_digest(self.parsed)
        return metadata_digest(self.metadata, {})


def _parsed_digest(parsed: ParsedDocument) -> str:
    """The digest of a parsed document's metadata: its own keys and its pages'."""
    return metadata_digest(parsed.metadata, {p.page: p.metadata for p in parsed.pages})


@dataclass
class DocumentOutcome:
    """What became of one job; ``store_failed``: the store refused it (stop the batch)."""

    label: str
    doc_id: str
    status: Literal["indexed", "unchanged", "failed"]
    reason: str = ""
    pages: int = 0
    ocr_pages: int = 0
    unread_pages: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    store_failed: bool = False


@dataclass
class PreparedDocument:
    """A document read and structured, ready to encode: its schema and page payloads."""

    job: DocumentJob
    schema: DocumentSchema
    records: list[PageRecord]
    ocr_pages: int
    unread_pages: list[int]
    warnings: list[str]
    seconds: dict[str, float]


def failure(job: DocumentJob, reason: str, *, store_failed: bool = False) -> DocumentOutcome:
    return DocumentOutcome(job.label, job.doc_id, "failed", reason, store_failed=store_failed)


@contextmanager
def _timed(seconds: dict[str, float], stage: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started


def page_records(parsed: ParsedDocument, schema: DocumentSchema) -> list[PageRecord]:
    """The stored payload of each page: text, size and section, with the schema's tenant and ACL."""
    return [
        PageRecord(
            doc_id=parsed.doc_id,
            doc_version=parsed.doc_version,
            page=page.page,
            n_pages=parsed.n_pages,
            text=page.text,
            source=parsed.source,
            section=schema.section_of(page.page),
            tenant=schema.tenant,
            acl=list(schema.acl),
            width=page.width,
            height=page.height,
            ocr=page.ocr,
            metadata={**parsed.metadata, **page.metadata},
        )
        for page in parsed.pages
    ]


def summarize_schema(
    summarizer: Summarizer, schema: DocumentSchema, records: Sequence[PageRecord]
) -> DocumentSchema:
    """``schema`` with the summarizer's page summaries (first lines kept where it gave none)."""
    found = {page: text for page, text in summarizer(schema, records).items() if text}
    name = getattr(summarizer, "name", None) or getattr(
        summarizer, "__name__", type(summarizer).__name__
    )
    return schema.model_copy(
        update={"page_summaries": {**schema.page_summaries, **found}, "summaries_by": str(name)}
    )


def _is_current(job: DocumentJob, version: str) -> bool:
    """The store holds this version with the same ACL and metadata (else it is re-indexed)."""
    stored = job.stored
    return stored is not None and (stored.version, stored.acl, stored.metadata_digest) == (
        version,
        job.acl,
        job.metadata_digest(),
    )


def _read(
    job: DocumentJob, path: Path, ocr: OcrEngine | None, ocr_workers: int | None, seconds: dict
) -> ParsedDocument | DocumentOutcome:
    """The file read (and OCR'd), or the outcome that ends the job: unchanged or failed."""
    try:
        with _timed(seconds, "parse"):
            problem = regular_file_problem(path)  # again: it may have changed since the walk
            if problem is not None:
                raise IngestError(str(path), problem)
            if _is_current(job, file_sha256(path)):
                return DocumentOutcome(job.label, job.doc_id, "unchanged", seconds=seconds)
            parsed = read_pdf(path.resolve(), doc_id=job.doc_id)
            parsed.metadata = dict(job.metadata)
        if ocr is not None:
            with _timed(seconds, "ocr"):
                apply_ocr(parsed, ocr, workers=ocr_workers)
    except OSError as exc:
        return failure(job, f"cannot read the file: {exc}")
    except IngestError as exc:
        return failure(job, exc.reason if exc.page is None else str(exc))
    except RENDER_ERRORS as exc:  # MuPDF on a damaged file, past the checks of open_pdf
        return failure(job, f"corrupt PDF: MuPDF cannot read it ({exc})")
    return parsed


def prepare_document(
    job: DocumentJob,
    *,
    ocr: OcrEngine | None,
    summarizer: Summarizer | None = None,
    ocr_workers: int | None = None,
) -> PreparedDocument | DocumentOutcome:
    """Parse (and OCR) the job's file, build its schema and page records.

    Returns the outcome instead when the job ends here: the stored version is current
    (unchanged) or the file cannot be read (failed, with the reason).
    """
    seconds = dict.fromkeys(STAGES, 0.0)
    if job.parsed is not None:
        parsed = job.parsed
        if _is_current(job, parsed.doc_version):
            return DocumentOutcome(job.label, job.doc_id, "unchanged", seconds=seconds)
    elif job.path is not None:
        read = _read(job, job.path, ocr, ocr_workers, seconds)
        if isinstance(read, DocumentOutcome):
            return read
        parsed = read
    else:
        raise ValueError(f"job {job.label!r} has neither a path nor a parsed document")
    with _timed(seconds, "schema"):
        schema = build_schema(parsed, tenant=job.tenant, acl=job.acl)
        schema = schema.model_copy(update={"metadata_digest": _parsed_digest(parsed)})
        records = page_records(parsed, schema)
        if summarizer is not None:
            schema = summarize_schema(summarizer, schema, records)
    warnings = list(parsed.warnings)
    stored = job.stored
    if stored is not None and stored.source and stored.source != parsed.source:
        warnings.append(
            f"{job.doc_id!r} replaced the document of the same id from "
            f"{stored.source} (now {parsed.source})"
        )
    return PreparedDocument(
        job, schema, records, len(parsed.ocr_pages), parsed.unread_pages, warnings, seconds
    )


def _page_inputs(
    records: Sequence[PageRecord], render: Callable[[PageRecord], Image.Image] | None
) -> list[PageInput]:
    return [
        PageInput(
            ref=PageRef(record.doc_id, record.page),
            text=record.text,
            load_image=None if render is None else (lambda record=record: render(record)),
        )
        for record in records
    ]


def encode_document(
    prepared: PreparedDocument,
    encoder: PageEncoder,
    *,
    batch_size: int,
    image_long_side: int = 1500,
    layout: MultivectorLayout | None = None,
) -> list[PageEmbedding]:
    """Embeddings of the document's pages, ``batch_size`` pages per encoder call.

    Image encoders get each page rendered on demand; the next batch is rendered on the process's
    CPU thread while the current one is encoded (one thread renders at a time: MuPDF is not
    thread-safe; :mod:`llama_index_docmemo.step_runtime`), so rendering hides behind a GPU's encoding. With the store's
    ``layout``, each page also gets the vectors the store writes (``lay_out``: token pooling,
    MUVERA), here in the worker that encoded it (stage ``"vectors"``), not in the writer.
    """
    records = prepared.records
    seconds = prepared.seconds
    source = records[0].source if records else ""
    renderable = encoder.modality == "image" and Path(source).is_file()

    def render(record: PageRecord) -> Image.Image:
        with _timed(seconds, "render"):
            return render_page(record.source, record.page, image_long_side)

    def rendered(batch: Sequence[PageRecord]) -> list[PageInput]:
        if not renderable:
            return _page_inputs(batch, None)
        images = {r.page: image for r, image in zip(batch, map(render, batch), strict=True)}
        return _page_inputs(batch, lambda r: images[r.page])

    batches = [records[i : i + batch_size] for i in range(0, len(records), batch_size)]
    embeddings: list[PageEmbedding] = []
    if not batches:
        return embeddings
    pool = cpu_pool()
    ahead = pool.submit(rendered, batches[0])
    try:
        for i in range(len(batches)):
            inputs = ahead.result()
            if i + 1 < len(batches):
                ahead = pool.submit(rendered, batches[i + 1])
            with _timed(seconds, "encode"):
                out = encoder.encode_pages(inputs)
            if len(out) != len(inputs):
                raise ValueError(
                    f"encoder {encoder.name} returned {len(out)} embeddings "
                    f"for {len(inputs)} pages of {prepared.job.doc_id}"
                )
            if layout is not None:
                with _timed(seconds, "vectors"):
                    out = [lay_out(e, layout, encoder.dim) for e in out]
            embeddings.extend(out)
            fault_point("batch-encoded")
    finally:
        ahead.cancel()  # a failed document renders no further batch
    return embeddings


def write_document(
    store: PageStore, prepared: PreparedDocument, embeddings: Sequence[PageEmbedding]
) -> DocumentOutcome:
    """Store the document (journal, pages, record, old version out).

    A document the store rejects before writing (a bad name or embedding) fails alone; a
    StoreError of the store itself (a full disk) is raised, for the executor to stop the batch.
    """
    job = prepared.job
    seconds = prepared.seconds
    try:
        with _timed(seconds, "write"):
            store.upsert_document(prepared.schema, prepared.records, embeddings)
    except DocumentRejectedError as exc:
        return failure(job, str(exc))
    logger.info("indexed %s: %d pages", job.label, len(prepared.records))
    fault_point("document-indexed")
    return DocumentOutcome(
        job.label,
        job.doc_id,
        "indexed",
        pages=len(prepared.records),
        ocr_pages=prepared.ocr_pages,
        unread_pages=prepared.unread_pages,
        warnings=prepared.warnings,
        seconds=seconds,
    )
