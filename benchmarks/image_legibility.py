"""Whether WebP/JPEG quality costs legibility at the size a model family sees: Tesseract's word
recall on page images encoded each way, against the PDF's own text layer.

Pages 2-6 of the first PDFs with a text layer of each dev set are rendered at 1500 px, sized for
the family (``llms/image_budget.py``), encoded as PNG, WebP and JPEG at several qualities,
OCR'd by Tesseract (inside MuPDF, as ``ingest/ocr.py`` does), and scored by the share of the text
layer's words (4+ letters, as a multiset) that the OCR finds. A format that loses words loses
them for a VLM too; equal recall says the bytes saved cost nothing Tesseract can see.

Usage: python benchmarks/image_legibility.py --data /work/shared/data [--docs 3] [--family openai]
"""

from __future__ import annotations

import argparse
import io
import os
import re
import statistics
from collections import Counter
from pathlib import Path

import pymupdf
from PIL import Image

from llama_index_docmemo.ingest.pdf import render_page
from llama_index_docmemo.llms.image_budget import fit_size

VARIANTS = [("PNG", None), ("WEBP", 80), ("JPEG", 80), ("JPEG", 70), ("JPEG", 60), ("JPEG", 50)]


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in re.findall(r"[A-Za-z]{4,}", text))


def ocr_text(data: bytes) -> str:
    """Tesseract's text of an encoded image (re-wrapped as a one-page PDF for MuPDF's OCR)."""
    with Image.open(io.BytesIO(data)) as image:
        png = io.BytesIO()
        image.convert("RGB").save(png, format="PNG")
    with pymupdf.open(stream=png.getvalue(), filetype="png") as img:
        pdf = pymupdf.open("pdf", img.convert_to_pdf())
    page = pdf[0]
    return page.get_textpage_ocr(dpi=72, full=True).extractText()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("DOCMEMO_DATA", "")))
    parser.add_argument("--docs", type=int, default=3)
    parser.add_argument("--family", default="openai")
    args = parser.parse_args()
    recall: dict[str, list[float]] = {f"{f}{q or ''}": [] for f, q in VARIANTS}
    size: dict[str, list[int]] = {k: [] for k in recall}
    for name in ("mmlongbench-doc", "financebench"):
        taken = 0
        for pdf in sorted((args.data / name / "pdfs").glob("*.pdf")):
            if taken >= args.docs:
                break
            with pymupdf.open(pdf) as doc:
                if doc.page_count < 6 or len(doc[1].get_text()) < 500:
                    continue
                texts = {p: doc[p - 1].get_text() for p in range(2, 7)}
            taken += 1
            for p, text in texts.items():
                gold = words(text)
                if sum(gold.values()) < 50:
                    continue
                image = render_page(pdf, p, 1500)
                image = image.resize(fit_size(args.family, *image.size), Image.Resampling.LANCZOS)
                for fmt, quality in VARIANTS:
                    buffer = io.BytesIO()
                    image.save(buffer, format=fmt, **({"quality": quality} if quality else {}))
                    found = words(ocr_text(buffer.getvalue()))
                    key = f"{fmt}{quality or ''}"
                    recall[key].append(sum((gold & found).values()) / sum(gold.values()))
                    size[key].append(len(buffer.getvalue()))
    n = len(recall["PNG"])
    print(f"family {args.family}: {n} pages, word recall of Tesseract against the text layer")
    for key in recall:
        print(
            f"{key:7} recall mean {statistics.mean(recall[key]):.3f}  "
            f"size mean {statistics.mean(size[key]) / 1024:.0f} KB"
        )


if __name__ == "__main__":
    main()
