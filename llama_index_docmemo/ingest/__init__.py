"""Ingestion: PDF files or LlamaIndex page Documents -> pages, OCR for image-only pages, schema memory."""

from llama_index_docmemo.ingest.documents import parse_documents
from llama_index_docmemo.ingest.ocr import (
    OcrEngine,
    OcrUnavailableError,
    TesseractOcr,
    find_tessdata,
)
from llama_index_docmemo.ingest.parsed import ParsedDocument, ParsedPage, TextLine, TocEntry
from llama_index_docmemo.ingest.pdf import (
    file_sha256,
    open_pdf,
    read_pdf,
    render_page,
    render_page_png,
)
from llama_index_docmemo.ingest.structure import build_schema

__all__ = [
    "OcrEngine",
    "OcrUnavailableError",
    "ParsedDocument",
    "ParsedPage",
    "TesseractOcr",
    "TextLine",
    "TocEntry",
    "build_schema",
    "file_sha256",
    "find_tessdata",
    "open_pdf",
    "parse_documents",
    "read_pdf",
    "render_page",
    "render_page_png",
]
