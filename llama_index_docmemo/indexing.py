"""Ingestion + schema + encoder + page store: PDFs (or LlamaIndex Documents) in, indexed pages out.

A document is identified by (tenant, doc id), the doc id being the file's path relative to the
indexed root (``docmemo index pdfs/`` stores ``pdfs/2023/10k.pdf`` as ``2023/10k.pdf``) or an
explicit id. A bad file never stops a batch: it is listed in the report with the reason, and every
other file is indexed. Files whose content hash equals the stored version are skipped; a changed
file replaces its pages (the old version stays visible until the new one is complete). A full
disk stops the batch with the documents not attempted listed.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import IngestError, StoreError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.ingest.documents import parse_documents
from llama_index_docmemo.ingest.ocr import INSTALL_HINT, OcrEngine, OcrMode, resolve_ocr
from llama_index_docmemo.ingest.parsed import ParsedDocument
from llama_index_docmemo.ingest.pdf import file_sha256, read_pdf, render_page
from llama_index_docmemo.ingest.structure import build_schema
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.access import check_name
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
        skipped: (path, reason) for entries of a folder left out on purpose (symlinks).
        doc_ids: source -> the doc id it is stored under.
        pages: pages written to the store.
        ocr_pages: pages whose text came from OCR.
        unread_pages: doc_id -> pages without a text layer indexed with empty text (no OCR).
        warnings: things a user should know that did not fail a file.
        seconds: wall time of the call.
    """

    indexed: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    failed: list[tuple[str, str]] = Field(default_factory=list)
    skipped: list[tuple[str, str]] = Field(default_factory=list)
    doc_ids: dict[str, str] = Field(default_factory=dict)
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
        lines += [f"skipped {path}: {reason}" for path, reason in self.skipped]
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


@dataclass(frozen=True)
class SourceFile:
    """A file to index and the doc id it is stored under (its path relative to its root)."""

    path: Path
    doc_id: str


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def regular_file_problem(path: Path, *, follow: bool = True) -> str | None:
    """Why ``path`` cannot be read as a file (checked before any read: a FIFO would block)."""
    try:
        info = path.stat() if follow else path.lstat()
    except FileNotFoundError:
        return "no such file or folder" if not path.is_symlink() else "broken symlink"
    except OSError as exc:
        return f"cannot read the file: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file: {_kind(info.st_mode)}"
    if not os.access(path, os.R_OK):
        return "cannot read the file: permission denied"
    return None


def _relative_id(path: Path, root: Path) -> str | None:
    try:
        return path.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:
        return None


def expand_paths(
    paths: Iterable[str | os.PathLike[str]], *, root: str | os.PathLike[str] | None = None
) -> tuple[list[SourceFile], list[tuple[str, str]], list[tuple[str, str]]]:
    """Files to index with their doc ids, from files and folders (``*.pdf``, recursive).

    Doc ids are paths relative to ``root`` when given; else a folder's files are relative to that
    folder and the files given one by one relative to their common parent folder (a single file:
    its name). Symlinks inside folders are not followed (named in ``skipped``); FIFOs, devices,
    unreadable files and missing paths are named in ``failed``; nothing is opened here.

    Returns:
        (files, failed, skipped) with ``failed``/``skipped`` as (path, reason) pairs.
    """
    found: list[tuple[Path, Path | None]] = []  # (file, folder it was found in)
    failed: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [(file, path) for file in _walk(path, failed, skipped)]
            continue
        problem = regular_file_problem(path)
        if problem is not None:
            failed.append((str(path), problem))
        else:
            found.append((path, None))
    loose = [file for file, folder in found if folder is None]
    common = Path(os.path.commonpath([str(f.absolute().parent) for f in loose])) if loose else None
    files: list[SourceFile] = []
    seen: set[Path] = set()
    for file, folder in found:
        key = file.resolve()
        if key in seen:
            continue
        seen.add(key)
        base = Path(root) if root is not None else (folder or common or file.parent)
        doc_id = _relative_id(file, base)
        if doc_id is None:
            failed.append((str(file), f"outside the indexed root {base}"))
            continue
        files.append(SourceFile(file, doc_id))
    return files, failed, skipped


def _walk(
    folder: Path, failed: list[tuple[str, str]], skipped: list[tuple[str, str]]
) -> list[Path]:
    """``*.pdf`` files under ``folder`` (sorted), never following symlinks."""

    def unreadable(exc: OSError) -> None:
        failed.append((str(exc.filename or folder), f"cannot list the folder: {exc.strerror}"))

    files: list[Path] = []
    for top, dirs, names in os.walk(folder, onerror=unreadable):
        base = Path(top)
        for name in sorted(dirs):
            if (base / name).is_symlink():
                skipped.append((str(base / name), "symlink to a folder, not followed"))
        dirs.sort()
        for name in sorted(names):
            path = base / name
            if path.suffix.lower() != ".pdf":
                continue
            if path.is_symlink():
                skipped.append((str(path), "symlink, not followed (pass its target explicitly)"))
                continue
            problem = regular_file_problem(path, follow=False)
            if problem is not None:
                failed.append((str(path), problem))
            else:
                files.append(path)
    return files


def _checked_access(tenant: str | None, acl: Sequence[str] | None) -> tuple[str | None, list[str]]:
    """Tenant and ACL groups as stored, or a ValueError naming the bad one."""
    if tenant is not None:
        check_name("tenant", tenant)
    groups = sorted({check_name("ACL group", group) for group in acl or ()})
    return tenant, groups


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
        root: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> IndexReport:
        """Index PDF files and folders of PDFs; bad files are listed, not raised.

        Args:
            paths: files and folders (their ``*.pdf`` files, recursively).
            tenant / acl: who may read them (see :mod:`llama_index_docmemo.store.access`).
            root: doc ids are paths relative to it; default: each folder given, and the common
                parent folder of the files given one by one (see :func:`expand_paths`).
        """
        started = time.perf_counter()
        report = IndexReport()
        tenant, acl = _checked_access(tenant, acl)
        files, report.failed, report.skipped = expand_paths(paths, root=root)
        owners: dict[str, Path] = {}
        todo: list[SourceFile] = []
        for source in files:
            if source.doc_id in owners:
                reason = (
                    f"doc_id {source.doc_id!r} is already taken in this batch by "
                    f"{owners[source.doc_id]}: index them from a common folder, or give ids"
                )
                report.failed.append((str(source.path), reason))
            else:
                owners[source.doc_id] = source.path
                todo.append(source)
        for i, source in enumerate(tqdm(todo, desc="indexing", unit="file", disable=not progress)):
            try:
                self._index_file(source, tenant, acl, report)
            except StoreError as exc:  # the store cannot take writes: the rest would fail too
                report.failed.append((str(source.path), str(exc)))
                report.failed += [
                    (str(rest.path), "not attempted: an earlier write to the store failed")
                    for rest in todo[i + 1 :]
                ]
                break
        return self._finish(report, started)

    def index_file(
        self,
        path: str | os.PathLike[str],
        *,
        doc_id: str,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
    ) -> IndexReport:
        """Index one PDF under an explicit ``doc_id`` (e.g. a database key instead of a path)."""
        started = time.perf_counter()
        report = IndexReport()
        tenant, acl = _checked_access(tenant, acl)
        check_name("doc_id", doc_id)
        file = Path(path)
        problem = regular_file_problem(file)
        if problem is not None:
            report.failed.append((str(file), problem))
            return self._finish(report, started)
        try:
            self._index_file(SourceFile(file, doc_id), tenant, acl, report)
        except StoreError as exc:
            report.failed.append((str(file), str(exc)))
        return self._finish(report, started)

    def _index_file(
        self, source: SourceFile, tenant: str | None, acl: list[str], report: IndexReport
    ) -> None:
        """Read, encode and store one file; file problems go to the report, StoreError is raised."""
        path = source.path
        report.doc_ids[str(path)] = source.doc_id
        try:
            problem = regular_file_problem(path)  # again: it may have changed since the walk
            if problem is not None:
                raise IngestError(str(path), problem)
            version = file_sha256(path)
            if self._is_current(source.doc_id, version, tenant, acl):
                report.unchanged.append(str(path))
                return
            parsed = read_pdf(path.resolve(), doc_id=source.doc_id, ocr=self.ocr_engine)
        except OSError as exc:
            report.failed.append((str(path), f"cannot read the file: {exc}"))
            return
        except IngestError as exc:
            report.failed.append((str(path), exc.reason if exc.page is None else str(exc)))
            return
        previous = self.store.get_schema(source.doc_id, tenant=tenant)
        self._index(parsed, tenant, acl, report, label=str(path))
        if previous is not None and previous.source and previous.source != parsed.source:
            report.warnings.append(
                f"{source.doc_id!r} replaced the document of the same id from "
                f"{previous.source} (now {parsed.source})"
            )
        fault_point("document-indexed")

    def index_documents(
        self,
        documents: Sequence[Document],
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        root: str | os.PathLike[str] | None = None,
        progress: bool = False,
    ) -> IndexReport:
        """Index page Documents from llama-index-readers-file's PDF readers (grouped by file).

        Doc ids are the files' paths relative to ``root``, by default their common folder
        (their names when the Documents carry no ``file_path``).
        """
        started = time.perf_counter()
        report = IndexReport()
        tenant, acl = _checked_access(tenant, acl)
        parsed_docs, failures = parse_documents(documents, ocr=self.ocr_engine, root=root)
        report.failed += [(exc.path, exc.reason) for exc in failures]
        for i, parsed in enumerate(
            tqdm(parsed_docs, desc="indexing", unit="doc", disable=not progress)
        ):
            report.doc_ids[parsed.source] = parsed.doc_id
            if self._is_current(parsed.doc_id, parsed.doc_version, tenant, acl):
                report.unchanged.append(parsed.source)
                continue
            try:
                self._index(parsed, tenant, acl, report, label=parsed.source)
            except StoreError as exc:
                report.failed.append((parsed.source, str(exc)))
                report.failed += [
                    (rest.source, "not attempted: an earlier write to the store failed")
                    for rest in parsed_docs[i + 1 :]
                ]
                break
        return self._finish(report, started)

    def _is_current(
        self, doc_id: str, version: str, tenant: str | None, acl: Sequence[str]
    ) -> bool:
        """The store holds this version with the same ACL (else it is re-indexed)."""
        if self.store.document_version(doc_id, tenant=tenant) != version:
            return False
        schema = self.store.get_schema(doc_id, tenant=tenant)
        return schema is not None and sorted(schema.acl) == sorted(acl)

    def _index(
        self,
        parsed: ParsedDocument,
        tenant: str | None,
        acl: Sequence[str],
        report: IndexReport,
        *,
        label: str,
    ) -> None:
        schema = build_schema(parsed, tenant=tenant, acl=acl)
        records = page_records(parsed, schema)
        if self.summarizer is not None:
            schema = summarize_schema(self.summarizer, schema, records)
        embeddings = self._encode(parsed, records)
        self.store.upsert_document(schema, records, embeddings)
        report.indexed.append(label)
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
