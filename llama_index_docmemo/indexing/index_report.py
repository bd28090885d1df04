"""What one indexing call did: the summary a user reads, the same whichever executor ran it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from llama_index_docmemo.errors import printable

STAGES: tuple[str, ...] = ("parse", "ocr", "schema", "render", "encode", "vectors", "write")
"""The per-document stages whose seconds :attr:`IndexReport.stage_seconds` adds up."""


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
        stage_seconds: seconds spent in each of :data:`STAGES`, summed over documents (with
            parallel workers the sum exceeds the wall time).
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
    stage_seconds: dict[str, float] = Field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def nothing_worked(self) -> bool:
        """Every file failed: none was indexed or found unchanged."""
        return bool(self.failed) and not self.indexed and not self.unchanged

    def summary(self) -> str:
        """A few lines for a terminal: counts, time, then each failure and warning (escaped by
        :func:`~llama_index_docmemo.errors.printable`: one line each, whatever a name holds)."""
        lines = [
            f"indexed {len(self.indexed)} documents ({self.pages} pages, {self.ocr_pages} by OCR), "
            f"{len(self.unchanged)} unchanged, {len(self.failed)} failed in {self.seconds:.1f} s"
        ]
        lines += [f"FAILED {source}: {reason}" for source, reason in self.failed]
        lines += [f"skipped {path}: {reason}" for path, reason in self.skipped]
        lines += [f"warning: {warning}" for warning in self.warnings]
        return "\n".join(map(printable, lines))
