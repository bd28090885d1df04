"""Ingestion + schema + encoder + page store: PDFs (or LlamaIndex Documents) in, indexed pages out.

A bad file never stops a batch: it is listed in the report with the reason, and every other file is
indexed. Files whose content hash equals the stored version are skipped; a changed file replaces its pages.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.documents import parse_documents
from llama_index_docmemo.ingest.ocr import INSTALL_HINT, OcrEngine, OcrMode, resolve_ocr
from llama_index_docmemo.ingest.parsed import ParsedDocument
from llama_index_docmemo.ingest.pdf import file_sha256, read_pdf, render_page
from llama_index_docmemo.ingest.structure import build_schema
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRecord, PageRef

if TYPE_CHECKING:
    from llama_index.core.schema import Document

logger = logging.getLogger(__name__)

Summarizer = Callable[[DocumentSchema, Sequence[PageRecord]], Mapping[int, str]]
"""(schema, page records) -> page -> summary; pages it leaves out keep their first-line summary."""


class IndexReport(BaseModel):
    """What one indexing call did.

    Args:
        indexed: sources (paths) newly indexed or replaced.
        unchanged: sources skipped because the store already holds this version.
        failed: (source, reason) for each file that could not be indexed.
        pages: pages written to the store.
        ocr_pages: pages whose text came from OCR.
        unread_pages: doc_id -> pages without a text layer indexed with empty text (no OCR).
        warnings: things a user should know that did not fail a file.
        seconds: wall time of the call.
    """

    indexed: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    failed: list[tuple[str, str]] = Field(default_factory=list)
    pages: int = 0
    ocr_pages: int = 0
    unread_pages: dict[str, list[int]] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        """A few lines for a terminal: counts, time, then each failure and warning."""
        lines = [
            f"indexed {len(self.indexed)} documents ({self.pages} pages, {self.ocr_pages} by OCR), "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed in {self.seconds:.1f} s"
        ]
        lines += [f"FAILED {source}: {reason}" for source, reason in self.failed]
        lines += [f"warning: {warning}" for warning in self.warnings]
        return "\n".join(lines)


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
        )
        for page in parsed.pages
    ]


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[str]]:
    """Files to index: given files as they are, folders expanded to their ``*.pdf`` files (recursive).

    Returns the files (deduplicated, in order) and paths that do not exist.
    """
    files: list[Path] = []
    missing: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")
        elif path.exists():
            found = [path]
        else:
            missing.append(str(path))
            continue
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files, missing


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


class DocumentIndexer:
    """Reads PDFs or page Documents, builds their schema, encodes their pages, and stores them.

    Args:
        store: the page store to fill.
        encoder: the page encoder (the store checks that it is the one it was created with).
        ocr: "auto" (Tesseract for pages without a text layer when installed, else a warning),
            True or "on" (required: raises OcrUnavailableError when absent), False or "off",
            or an OcrEngine.
        summarizer: optional page summarizer (a VLM); None keeps first-line summaries.
        batch_size: pages per encoder call.
        image_long_side: long side in pixels of page images rendered for image encoders.
    """

    def __init__(
        self,
        store: PageStore,
        encoder: PageEncoder,
        *,
        ocr: OcrMode | OcrEngine = "auto",
        summarizer: Summarizer | None = None,
        batch_size: int = 32,
        image_long_side: int = 1500,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.store = store
        self.encoder = encoder
        self.ocr_engine = resolve_ocr(ocr)
        self._no_ocr_reason = (
            "OCR is off" if ocr is False or ocr == "off" else f"no OCR engine: {INSTALL_HINT}"
        )
        self.summarizer = summarizer
        self.batch_size = batch_size
        self.image_long_side = image_long_side

    def index_paths(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        progress: bool = False,
    ) -> IndexReport:
        """Index PDF files and folders of PDFs (doc_id = file name); bad files are listed, not raised."""
        started = time.perf_counter()
        report = IndexReport()
        files, missing = expand_paths(paths)
        report.failed += [(path, "no such file or folder") for path in missing]
        owners: dict[str, Path] = {}
        for path in tqdm(files, desc="indexing", unit="file", disable=not progress):
            doc_id = path.name
            if doc_id in owners:
                reason = f"doc_id {doc_id!r} is already taken in this batch by {owners[doc_id]}"
                report.failed.append((str(path), reason))
                continue
            owners[doc_id] = path
            try:
                version = file_sha256(path)
                if self._is_current(doc_id, version, tenant, acl):
                    report.unchanged.append(str(path))
                    continue
                parsed = read_pdf(path, doc_id=doc_id, ocr=self.ocr_engine)
            except OSError as exc:
                report.failed.append((str(path), f"cannot read the file: {exc}"))
                continue
            except IngestError as exc:
                report.failed.append((str(path), exc.reason if exc.page is None else str(exc)))
                continue
            self._index(parsed, tenant, acl, report)
        return self._finish(report, started)

    def index_documents(
        self,
        documents: Sequence[Document],
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        progress: bool = False,
    ) -> IndexReport:
        """Index page Documents from llama-index-readers-file's PDF readers (grouped by file)."""
        started = time.perf_counter()
        report = IndexReport()
        parsed_docs, failures = parse_documents(documents, ocr=self.ocr_engine)
        report.failed += [(exc.path, exc.reason) for exc in failures]
        for parsed in tqdm(parsed_docs, desc="indexing", unit="doc", disable=not progress):
            if self._is_current(parsed.doc_id, parsed.doc_version, tenant, acl):
                report.unchanged.append(parsed.source)
                continue
            self._index(parsed, tenant, acl, report)
        return self._finish(report, started)

    def _is_current(
        self, doc_id: str, version: str, tenant: str | None, acl: Sequence[str] | None
    ) -> bool:
        """The store holds this version with the same access fields (else it is re-indexed)."""
        if self.store.document_version(doc_id) != version:
            return False
        schema = self.store.get_schema(doc_id)
        return (
            schema is not None
            and schema.tenant == tenant
            and sorted(schema.acl) == sorted(acl or [])
        )

    def _index(
        self,
        parsed: ParsedDocument,
        tenant: str | None,
        acl: Sequence[str] | None,
        report: IndexReport,
    ) -> None:
        schema = build_schema(parsed, tenant=tenant, acl=acl or ())
        records = page_records(parsed, schema)
        if self.summarizer is not None:
            schema = summarize_schema(self.summarizer, schema, records)
        embeddings = self._encode(parsed, records)
        self.store.upsert_document(schema, records, embeddings)
        report.indexed.append(parsed.source)
        report.pages += len(records)
        report.ocr_pages += len(parsed.ocr_pages)
        if parsed.unread_pages:
            report.unread_pages[parsed.doc_id] = parsed.unread_pages
        logger.info("indexed %s: %d pages", parsed.source, len(records))

    def _encode(self, parsed: ParsedDocument, records: Sequence[PageRecord]) -> list[PageEmbedding]:
        renderable = Path(parsed.source).is_file()
        inputs = [
            PageInput(
                ref=PageRef(record.doc_id, record.page),
                text=record.text,
                load_image=(
                    functools.partial(render_page, parsed.source, record.page, self.image_long_side)
                    if renderable
                    else None
                ),
            )
            for record in records
        ]
        embeddings: list[PageEmbedding] = []
        for start in range(0, len(inputs), self.batch_size):
            batch = inputs[start : start + self.batch_size]
            out = self.encoder.encode_pages(batch)
            if len(out) != len(batch):
                raise ValueError(
                    f"encoder {self.encoder.name} returned {len(out)} embeddings "
                    f"for {len(batch)} pages of {parsed.doc_id}"
                )
            embeddings.extend(out)
        return embeddings

    def _finish(self, report: IndexReport, started: float) -> IndexReport:
        unread = sum(len(pages) for pages in report.unread_pages.values())
        if unread:
            reason = (
                self._no_ocr_reason
                if self.ocr_engine is None
                else "their PDF file was not available to OCR"
            )
            report.warnings.append(
                f"{unread} pages in {len(report.unread_pages)} documents have no text layer and "
                f"were indexed without text ({reason})"
            )
        report.seconds = time.perf_counter() - started
        return report
