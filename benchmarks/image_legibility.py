"""What an encoding costs in legibility at the size a model family sees: Tesseract's word recall on
page images encoded each way, against the PDF's own text layer.

Pages 2-6 (``--pages``) of the chosen PDFs (``--pdf``, or the first with a text layer of each dev set) are
rendered at 1500 px, sized for the family (``llms/image_policy.py``), encoded each way (format,
JPEG quality, a scale of the family's size, colour or grayscale), OCR'd by Tesseract (inside
MuPDF, as ``ingest/ocr.py`` does) at twice the pixels sent, and scored by the share of the text
layer's words (4+ letters, as a multiset) that the OCR finds. Doubling gives Tesseract the
x-height it needs without adding information: only what the encoding kept is read. A variant that
loses words loses them for a VLM too; equal recall says the bytes saved cost nothing Tesseract
can see. The default variants are PNG, the byte budget's rungs (``llms/image_policy.py``) and a
grid around them.

Usage: python benchmarks/image_legibility.py --data /work/shared/data [--docs 3] [--family openai]
       [--pdf mmlongbench-doc/pdfs/2303.05039v2.pdf ...] [--variant JPEG:50:0.8:L ...]
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
from llama_index_docmemo.llms.image_policy import LADDER, fit_size

GRID = ["PNG:0:1.0:RGB", "JPEG:70:1.0:L", "JPEG:70:0.8:RGB", "JPEG:50:0.8:RGB", "JPEG:40:0.7:RGB"]
OCR_UPSCALE = 2


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in re.findall(r"[A-Za-z]{4,}", text))


def ocr_text(data: bytes) -> str:
    """Tesseract's text of an encoded image at :data:`OCR_UPSCALE` times its pixels (re-wrapped as
    a one-page PDF for MuPDF's OCR)."""
    with Image.open(io.BytesIO(data)) as image:
        width = image.width
        png = io.BytesIO()
        image.convert("RGB").save(png, format="PNG")
    with pymupdf.open(stream=png.getvalue(), filetype="png") as img:
        pdf = pymupdf.open("pdf", img.convert_to_pdf())
    page = pdf[0]
    dpi = round(72 * OCR_UPSCALE * width / page.rect.width)
    return page.get_textpage_ocr(dpi=dpi, full=True).extractText()


def encode(image: Image.Image, variant: str) -> bytes:
    """``image`` encoded as ``FORMAT:QUALITY:SCALE:MODE`` (quality 0 for PNG)."""
    fmt, quality, scale, mode = variant.split(":")
    image = image.convert(mode)
    if float(scale) < 1:
        size = (round(image.width * float(scale)), round(image.height * float(scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": int(quality)} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def ladder_variants() -> list[str]:
    return [f"JPEG:{r.quality}:{r.scale}:RGB" for r in LADDER]


def pages_of(args: argparse.Namespace) -> list[tuple[Path, int, str]]:
    """(pdf, page, text layer) of pages 2-6 of the chosen PDFs."""
    if args.pdf:
        pdfs = [args.data / p for p in args.pdf]
    else:
        pdfs = []
        for name in ("mmlongbench-doc", "financebench"):
            found = sorted((args.data / name / "pdfs").glob("*.pdf"))
            pdfs += [p for p in found if _has_text(p)][: args.docs]
    out = []
    for pdf in pdfs:
        with pymupdf.open(pdf) as doc:
            last = min(1 + args.pages, doc.page_count)
            out += [(pdf, p, doc[p - 1].get_text()) for p in range(2, last + 1)]
    return out


def _has_text(pdf: Path) -> bool:
    with pymupdf.open(pdf) as doc:
        return doc.page_count >= 6 and len(doc[1].get_text()) >= 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("DOCMEMO_DATA", "")))
    parser.add_argument("--docs", type=int, default=3, help="PDFs per dev set without --pdf")
    parser.add_argument("--pdf", action="append", help="a PDF under --data (repeatable)")
    parser.add_argument("--pages", type=int, default=5, help="pages per PDF from page 2")
    parser.add_argument("--family", default="openai")
    parser.add_argument("--variant", action="append", help="FORMAT:QUALITY:SCALE:MODE")
    args = parser.parse_args()
    variants = list(dict.fromkeys(args.variant or [*GRID, *ladder_variants()]))
    recall: dict[str, list[float]] = {v: [] for v in variants}
    size: dict[str, list[int]] = {v: [] for v in variants}
    for pdf, page, text in pages_of(args):
        gold = words(text)
        if sum(gold.values()) < 50:
            continue
        image = render_page(pdf, page, 1500)
        image = image.resize(fit_size(args.family, *image.size), Image.Resampling.LANCZOS)
        for variant in variants:
            data = encode(image, variant)
            found = words(ocr_text(data))
            recall[variant].append(sum((gold & found).values()) / sum(gold.values()))
            size[variant].append(len(data))
        row = " ".join(f"{recall[v][-1]:.2f}" for v in variants)
        print(f"{pdf.name} p{page}: {row}", flush=True)
    n = len(recall[variants[0]])
    print(f"family {args.family}: {n} pages, word recall of Tesseract against the text layer")
    print("variant (format:quality:scale:mode)   recall mean [min]   KB mean [max]")
    for v in variants:
        print(
            f"{v:22} {statistics.mean(recall[v]):.3f} [{min(recall[v]):.3f}]   "
            f"{statistics.mean(size[v]) / 1024:5.0f} [{max(size[v]) / 1024:.0f}]"
        )


if __name__ == "__main__":
    main()
