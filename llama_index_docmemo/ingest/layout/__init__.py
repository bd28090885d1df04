"""Page layout (tables, charts, figures, captions) from MinerU output or PyMuPDF detection, cached per version."""

from llama_index_docmemo.ingest.layout.blocks import CROP_KINDS, LayoutBlock, iou, normalize_kind
from llama_index_docmemo.ingest.layout.cache import LayoutCache
from llama_index_docmemo.ingest.layout.mineru import detect_generation, read_mineru_output
from llama_index_docmemo.ingest.layout.mineru_cli import index_layout, mineru_executable, run_mineru
from llama_index_docmemo.ingest.layout.pymupdf_detect import (
    DetectOptions,
    detect_layout_pymupdf,
    layout_model_available,
)

__all__ = [
    "CROP_KINDS",
    "DetectOptions",
    "LayoutBlock",
    "LayoutCache",
    "detect_generation",
    "detect_layout_pymupdf",
    "index_layout",
    "iou",
    "layout_model_available",
    "mineru_executable",
    "normalize_kind",
    "read_mineru_output",
    "run_mineru",
]
