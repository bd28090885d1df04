"""Layout analysis of a page of many vector drawings is bounded: a 43 KB PDF of 8,000 separate
squares took 275 s in PyMuPDF's pairwise clustering; it now takes well under a few seconds and
still gives the chart's region (the crop a reader gets)."""

from __future__ import annotations

import time
from pathlib import Path

import pymupdf

from llama_index_docmemo.ingest.layout.pymupdf_detect import detect_layout_pymupdf


def dense_page(path: Path, squares: int) -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((40, 60), "Figure 1: a dot plot of every sensor reading", fontsize=10)
    cols = int(squares**0.5) + 1
    step = 500 / cols
    operators = [
        f"{40 + (i % cols) * step:.2f} {742 - (i // cols) * step:.2f} {step * 0.4:.2f} "
        f"{step * 0.4:.2f} re f"
        for i in range(squares)
    ]
    xref = page.get_contents()[-1]
    doc.update_stream(xref, doc.xref_stream(xref) + ("\n0.2 g\n" + "\n".join(operators)).encode())
    doc.save(path, deflate=True)
    return path


def test_a_page_of_eight_thousand_squares_is_analysed_in_seconds(tmp_path: Path) -> None:
    path = dense_page(tmp_path / "dots.pdf", 8000)
    assert path.stat().st_size < 60_000
    started = time.perf_counter()
    blocks = detect_layout_pymupdf(path, 1)
    assert time.perf_counter() - started < 5
    (chart,) = [b for b in blocks if b.kind == "chart"]
    x0, y0, x1, y1 = chart.bbox
    assert x0 <= 41 and y0 <= 101 and x1 >= 530 and y1 >= 580  # the whole plot
    assert "Figure 1" in chart.caption
