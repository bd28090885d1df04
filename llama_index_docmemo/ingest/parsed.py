"""What every reader (PDF file, LlamaIndex Documents) hands to the schema builder and the indexer.

Plain data: the readers fill it, :mod:`structure` turns it into a schema, the indexer into page records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TocEntry:
    """One outline (bookmark) entry: depth (1 = top), title, 1-based target page."""

    level: int
    title: str
    page: int


@dataclass(frozen=True)
class TextLine:
    """A line of the text layer with its style, the raw material of heading detection."""

    page: int
    text: str
    size: float
    bold: bool = False


@dataclass
class ParsedPage:
    """Text and size of one page.

    Args:
        ocr: the text came from OCR (the page has no text layer).
        unread: the page has no text layer and no OCR engine read it (indexed with empty text).
        metadata: the app's keys of this page beyond the document's (see
            :mod:`llama_index_docmemo.store.metadata`).
    """

    page: int
    text: str
    width: float = 0.0
    height: float = 0.0
    ocr: bool = False
    unread: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedDocument:
    """One document as read: pages in order plus the structural cues the schema builder uses.

    Args:
        doc_id: stable identifier (the file name by default).
        doc_version: sha256 of the file (or of the page texts when there is no file).
        source: where it came from (a path), for citations and re-rendering.
        n_pages: pages in the document (may exceed ``len(pages)`` when a reader gave a subset).
        title_hint: the title in the file's metadata, if any.
        metadata: the app's keys every page of the document carries.
        warnings: what the reader gave that was left out (reserved metadata keys...).
    """

    doc_id: str
    doc_version: str
    source: str
    n_pages: int
    pages: list[ParsedPage]
    title_hint: str = ""
    toc: list[TocEntry] = field(default_factory=list)
    lines: list[TextLine] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def ocr_pages(self) -> list[int]:
        return [p.page for p in self.pages if p.ocr]

    @property
    def unread_pages(self) -> list[int]:
        return [p.page for p in self.pages if p.unread]
