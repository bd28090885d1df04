"""Run the MinerU CLI on a PDF and index its layout with the document (``docmemo index --layout mineru``)."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pymupdf

from llama_index_docmemo.errors import IngestError, MissingExtraError
from llama_index_docmemo.ingest.layout.blocks import LayoutBlock
from llama_index_docmemo.ingest.layout.cache import LayoutCache
from llama_index_docmemo.ingest.layout.mineru import read_mineru_output
from llama_index_docmemo.ingest.layout.pymupdf_detect import DetectOptions, detect_layout_pymupdf
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS

logger = logging.getLogger(__name__)
MINERU_BIN_ENV = "DOCMEMO_MINERU_BIN"


def mineru_executable() -> str | None:
    """Path of ``mineru-kit``: $DOCMEMO_MINERU_BIN (e.g. a separate venv), else the one on PATH."""
    explicit = os.environ.get(MINERU_BIN_ENV)
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return shutil.which("mineru-kit")


def run_mineru(
    pdf: str | Path, out_dir: str | Path, *, tier: str = "flash", timeout_s: float = 1800.0
) -> Path:
    """Parse ``pdf`` with ``mineru-kit parse --tier <tier> -f zip``; returns the output zip.

    The flash tier runs offline on CPU with no model download. Raises MissingExtraError when MinerU is not
    installed, IngestError when it fails or times out.
    """
    exe = mineru_executable()
    if exe is None:
        if importlib.util.find_spec("mineru") is None:
            raise MissingExtraError("MinerU layout analysis (--layout mineru)", "mineru", "mineru")
        raise IngestError(
            str(pdf),
            f"mineru is importable but its 'mineru-kit' CLI is not on PATH; set {MINERU_BIN_ENV}",
        )
    pdf = Path(pdf)
    out = Path(out_dir) / f"{pdf.stem}.mineru.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "parse", str(pdf), "-o", str(out), "-f", "zip", "--tier", tier]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise IngestError(str(pdf), f"MinerU did not finish within {timeout_s:.0f} s") from exc
    if proc.returncode != 0 or not out.is_file():
        tail = (proc.stderr or proc.stdout or "").strip()[-600:]
        raise IngestError(str(pdf), f"MinerU failed (exit {proc.returncode}): {tail}")
    return out


def _detect_or_skip(
    doc: pymupdf.Document, page: int, options: DetectOptions | None
) -> list[LayoutBlock]:
    """One page's blocks; a page MuPDF cannot analyse (too large...) gets none, with a warning."""
    try:
        return detect_layout_pymupdf(doc, page, options)
    except RENDER_ERRORS as exc:
        logger.warning("layout of %s page %d skipped: %s", doc.name, page, exc)
        return []


def index_layout(
    pdf: str | Path,
    doc_version: str,
    cache: LayoutCache,
    *,
    method: str = "mineru",
    mineru_output: str | Path | None = None,
    work_dir: str | Path | None = None,
    options: DetectOptions | None = None,
) -> dict[int, list[LayoutBlock]]:
    """Compute a document's layout once and store it in ``cache`` under its version.

    Args:
        method: "mineru" (run the CLI, or read ``mineru_output`` when given) or "pymupdf" (every page now).
        mineru_output: an existing MinerU zip/folder of any generation to read instead of running MinerU.
        work_dir: where MinerU writes its zip (default: the cache folder).
    """
    if method == "mineru":
        source = mineru_output or run_mineru(
            pdf, work_dir or cache.root / "mineru", timeout_s=1800.0
        )
        pages = read_mineru_output(source)
        label = next((b.source for blocks in pages.values() for b in blocks), "mineru")
    elif method == "pymupdf":
        with pymupdf.open(str(pdf)) as doc:
            pages = {p: _detect_or_skip(doc, p, options) for p in range(1, doc.page_count + 1)}
        label = "pymupdf"
    else:
        raise ValueError(f"layout method must be 'mineru' or 'pymupdf', not {method!r}")
    cache.save(doc_version, pages, source=label)
    return pages
