"""DocumentIndexer: PDFs (or LlamaIndex Documents) in, indexed pages out, through an executor.

A document is identified by (tenant, doc id), the doc id being the file's path relative to the
indexed root (``docmemo index pdfs/`` stores ``pdfs/2023/10k.pdf`` as ``2023/10k.pdf``) or an
explicit id. A bad file never stops a batch: it is listed in the report with the reason, and every
other file is indexed; a file whose name the store cannot hold (a newline, bytes that are not
UTF-8) fails before the store is asked anything, and a document the store rejects fails alone.
Files whose content hash equals the stored version are skipped; a changed file replaces its pages
(the old version stays visible until the new one is complete). A store that refuses a write (a
full disk) stops the batch with the documents not attempted listed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.indexing.executors import IndexExecutor, SerialExecutor
from llama_index_docmemo.indexing.index_report import IndexReport
from llama_index_docmemo.indexing.stages import (
    DocumentJob,
    DocumentOutcome,
    StoredVersion,
    Summarizer,
)
from llama_index_docmemo.ingest.documents import parse_documents
from llama_index_docmemo.ingest.files import SourceFile, expand_paths, regular_file_problem
from llama_index_docmemo.ingest.ocr import INSTALL_HINT, OcrEngine, OcrMode, resolve_ocr
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.metadata import user_metadata
from llama_index_docmemo.store.points import check_name, check_utf8
from llama_index_docmemo.store.scope import PageFilter

if TYPE_CHECKING:
    from llama_index.core.schema import Document

NOT_ATTEMPTED = "not attempted: an earlier write to the store failed"


def _checked_access(
    tenant: str | None, acl: Sequence[str] | None
) -> tuple[str | None, tuple[str, ...]]:
    """Tenant and ACL groups as stored, or a ValueError naming the bad one."""
    if tenant is not None:
        check_name("tenant", tenant)
    groups = tuple(sorted({check_name("ACL group", group) for group in acl or ()}))
    return tenant, groups


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The app's metadata for every page of the files indexed, or a ValueError naming the keys
    that cannot be stored (reserved by the package, or not JSON)."""
    kept, problems = user_metadata(metadata or {})
    if problems:
        raise ValueError("; ".join(problems))
    return kept


def _name_problem(job: DocumentJob) -> str | None:
    """Why the store cannot hold the job's doc id or file name (control characters, bytes that
    are not UTF-8), or None."""
    try:
        check_utf8("file name", job.label)
        check_name("doc_id", job.doc_id)
    except ValueError as exc:
        return f"{exc}: rename the file"
    return None


def _unique_ids(files: Sequence[SourceFile], report: IndexReport) -> list[SourceFile]:
    """The files whose doc id no earlier file of the batch took (the others fail, named)."""
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
    return todo


def _relative_below(path: str, doc_id: str) -> bool:
    """Whether ``doc_id`` is ``path`` relative to one of the folders above it."""
    parts = PurePosixPath(doc_id).parts
    return Path(path).parts[-len(parts) :] == parts


def _file_key(job: DocumentJob) -> str:
    """The real path of the job's file ("" for a document that is not a file on disk)."""
    if job.path is not None:
        return os.path.realpath(job.path)
    source = job.parsed.source if job.parsed is not None else ""
    return os.path.realpath(source) if os.path.isabs(source) else ""


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
        executor: IndexExecutor | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> IndexReport:
        """Index PDF files and folders of PDFs; bad files are listed, not raised.

        Args:
            paths: files and folders (their ``*.pdf`` files, recursively).
            tenant / acl: who may read them (see :mod:`llama_index_docmemo.store.scope`).
            root: doc ids are paths relative to it; default: each folder given, and the common
                parent folder of the files given one by one (see
                :func:`~llama_index_docmemo.ingest.files.expand_paths`).
            progress: show a progress bar (documents done).
            executor: who runs the steps: this process by default, or
                :class:`llama_index_docmemo.distributed.RayExecutor`.
            metadata: the app's keys stored with every page (JSON values; keys the package
                reserves raise ValueError, see :mod:`llama_index_docmemo.store.metadata`).
        """
        started = time.perf_counter()
        report = IndexReport()
        tenant, groups = _checked_access(tenant, acl)
        keys = _checked_metadata(metadata)
        files, report.failed, report.skipped = expand_paths(paths, root=root)
        jobs = [
            DocumentJob(str(s.path), s.doc_id, tenant, groups, path=s.path, metadata=keys)
            for s in _unique_ids(files, report)
        ]
        self._run(self._stored_ids(jobs), report, progress, executor)
        return self._finish(report, started)

    def index_file(
        self,
        path: str | os.PathLike[str],
        *,
        doc_id: str,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> IndexReport:
        """Index one PDF under an explicit ``doc_id`` (e.g. a database key instead of a path),
        with ``metadata`` on every page (as for :meth:`index_paths`)."""
        started = time.perf_counter()
        report = IndexReport()
        tenant, groups = _checked_access(tenant, acl)
        keys = _checked_metadata(metadata)
        check_name("doc_id", doc_id)
        file = Path(path)
        problem = regular_file_problem(file)
        if problem is not None:
            report.failed.append((str(file), problem))
        else:
            job = DocumentJob(str(file), doc_id, tenant, groups, path=file, metadata=keys)
            self._run([job], report, False, None)
        return self._finish(report, started)

    def index_documents(
        self,
        documents: Sequence[Document],
        *,
        tenant: str | None = None,
        acl: Sequence[str] | None = None,
        root: str | os.PathLike[str] | None = None,
        progress: bool = False,
        executor: IndexExecutor | None = None,
    ) -> IndexReport:
        """Index page Documents from llama-index-readers-file's PDF readers (grouped by file).

        Doc ids are the files' paths relative to ``root``, by default their common folder
        (their names when the Documents carry no ``file_path``). The Documents are parsed here;
        ``executor`` runs the schema, encoding and writes.
        """
        started = time.perf_counter()
        report = IndexReport()
        tenant, groups = _checked_access(tenant, acl)
        parsed_docs, failures = parse_documents(documents, ocr=self.ocr_engine, root=root)
        report.failed += [(exc.path, exc.reason) for exc in failures]
        jobs = [DocumentJob(p.source, p.doc_id, tenant, groups, parsed=p) for p in parsed_docs]
        self._run(self._stored_ids(jobs), report, progress, executor)
        return self._finish(report, started)

    def _stored_ids(self, jobs: Sequence[DocumentJob]) -> list[DocumentJob]:
        """The jobs, each file the store already holds (same tenant, same absolute path) under
        the id it holds it by, when that id is the file's path relative to a folder above it:
        indexing ``root/b/`` after ``root/`` (or from the CLI after Python) replaces
        ``b/x.pdf``, never stores ``x.pdf`` a second time. An id the app chose (``--id``) is
        not a path and is not taken over."""
        keys = {job.label: _file_key(job) for job in jobs}
        held: dict[tuple[str | None, str], str] = {}
        for tenant, groups in {(job.tenant, job.acl) for job in jobs if keys[job.label]}:
            scope = PageFilter(tenant=tenant, acl_groups=groups or None)
            for schema in self.store.list_documents(scope):
                real = os.path.realpath(schema.source) if schema.source else ""
                if real and _relative_below(real, schema.doc_id):
                    held[(tenant, real)] = schema.doc_id
        out: list[DocumentJob] = []
        for job in jobs:
            stored = held.get((job.tenant, keys[job.label] or ""))
            if stored is not None and stored != job.doc_id:
                parsed = job.parsed and replace(job.parsed, doc_id=stored)
                job = replace(job, doc_id=stored, parsed=parsed)
            out.append(job)
        return out

    def _planned(self, jobs: Sequence[DocumentJob], report: IndexReport) -> list[DocumentJob]:
        """The jobs with the version the store holds of each; stops where the store fails."""
        planned: list[DocumentJob] = []
        for i, job in enumerate(jobs):
            report.doc_ids[job.label] = job.doc_id
            problem = _name_problem(job)
            if problem is not None:  # before the store: it keys documents by these names
                report.failed.append((job.label, problem))
                continue
            try:
                schema = self.store.get_schema(job.doc_id, tenant=job.tenant)
            except StoreError as exc:  # the store does not answer: the rest would fail too
                report.failed.append((job.label, str(exc)))
                report.failed += [(rest.label, NOT_ATTEMPTED) for rest in jobs[i + 1 :]]
                break
            if schema is not None:
                acl = tuple(sorted(schema.acl))
                stored = StoredVersion(
                    schema.doc_version, acl, schema.source, schema.metadata_digest
                )
                job = replace(job, stored=stored)
            planned.append(job)
        return planned

    def _run(
        self,
        jobs: Sequence[DocumentJob],
        report: IndexReport,
        progress: bool,
        executor: IndexExecutor | None,
    ) -> None:
        """Run the jobs on ``executor`` (this process by default) and fill ``report``."""
        jobs = self._planned(jobs, report)
        outcomes: dict[str, DocumentOutcome] = {}
        run = (executor or SerialExecutor()).run(jobs, self)
        unit = "file" if jobs and jobs[0].path is not None else "doc"
        bulk = self.store.bulk_load() if len(jobs) > 1 else nullcontext()
        try:
            with (
                bulk,
                tqdm(total=len(jobs), desc="indexing", unit=unit, disable=not progress) as bar,
            ):
                for outcome in run:
                    outcomes[outcome.label] = outcome
                    bar.update(1)
                    if outcome.store_failed:
                        break
        finally:
            run.close()
        for job in jobs:  # in the batch's order, whichever order the executor finished in
            outcome = outcomes.get(job.label)
            if outcome is None:
                report.failed.append((job.label, NOT_ATTEMPTED))
            else:
                self._record(outcome, report)

    @staticmethod
    def _record(outcome: DocumentOutcome, report: IndexReport) -> None:
        for stage, seconds in outcome.seconds.items():
            report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + seconds
        if outcome.status == "failed":
            report.failed.append((outcome.label, outcome.reason))
            return
        if outcome.status == "unchanged":
            report.unchanged.append(outcome.label)
            return
        report.indexed.append(outcome.label)
        report.pages += outcome.pages
        report.ocr_pages += outcome.ocr_pages
        report.warnings += outcome.warnings
        if outcome.unread_pages:
            report.unread_pages[outcome.doc_id] = outcome.unread_pages

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
