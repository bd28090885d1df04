"""Ingest speed and storage of the default encoder: pages/s per stage and bytes per stored page.

Usage:
    python benchmarks/ingest.py --data DIR [--ocr auto|off] [--limit-docs N] [--out FILE.md]

DIR is a folder of PDFs, a set folder holding pdfs/, or the data root (default $DOCMEMO_DATA; its
mmlongbench-doc/pdfs is used). Stages, timed separately on every PDF: text extraction
(``read_pdf``, with Tesseract OCR for image-only pages under ``--ocr auto``), schema building,
encoding with ``default_encoder()``, and upsert into a fresh Qdrant Edge store on a temporary
folder. Storage: the store folder's size on disk per page, and the raw vector bytes per page.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import page_records
from llama_index_docmemo.ingest.ocr import resolve_ocr
from llama_index_docmemo.ingest.pdf import read_pdf
from llama_index_docmemo.ingest.structure import build_schema
from llama_index_docmemo.store.edge import EdgePageStore
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRef


def pdf_files(root: Path) -> list[Path]:
    for folder in (root, root / "pdfs", root / "mmlongbench-doc" / "pdfs"):
        files = sorted(folder.glob("*.pdf"))
        if files:
            return files
    sys.exit(f"{root}: no PDF files there, in pdfs/, or in mmlongbench-doc/pdfs/")


def folder_bytes(folder: Path) -> int:
    """Allocated size on disk (sparse pre-allocated files count only what they use)."""
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def vector_bytes(embedding: PageEmbedding) -> int:
    """float32 dense vectors plus 4-byte index + 4-byte weight per sparse term."""
    sparse = 8 * len(embedding.sparse.indices) if embedding.sparse is not None else 0
    return embedding.multivector.nbytes + embedding.pooled.nbytes + sparse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=os.environ.get("DOCMEMO_DATA"))
    parser.add_argument("--ocr", choices=["auto", "off"], default="auto")
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("--data DIR (or $DOCMEMO_DATA) is required")
    files = pdf_files(Path(args.data))[: args.limit_docs]
    ocr = resolve_ocr("auto") if args.ocr == "auto" else None

    started = time.perf_counter()
    encoder = default_encoder()
    load_s = time.perf_counter() - started
    seconds = {"extract": 0.0, "schema": 0.0, "encode": 0.0, "upsert": 0.0}
    pages = ocr_pages = raw = text_bytes = 0
    folder = Path(tempfile.mkdtemp(prefix="docmemo-ingest-")) / "store"
    with EdgePageStore(
        folder, encoder_name=encoder.name, dim=encoder.dim, sparse=encoder.sparse
    ) as store:
        for path in files:
            t0 = time.perf_counter()
            parsed = read_pdf(path, ocr=ocr)
            t1 = time.perf_counter()
            schema = build_schema(parsed)
            records = page_records(parsed, schema)
            t2 = time.perf_counter()
            embeddings = encoder.encode_pages(
                [PageInput(PageRef(r.doc_id, r.page), r.text) for r in records]
            )
            t3 = time.perf_counter()
            store.upsert_document(schema, records, embeddings)
            t4 = time.perf_counter()
            seconds["extract"] += t1 - t0
            seconds["schema"] += t2 - t1
            seconds["encode"] += t3 - t2
            seconds["upsert"] += t4 - t3
            pages += len(records)
            ocr_pages += sum(p.ocr for p in parsed.pages)
            raw += sum(vector_bytes(e) for e in embeddings)
            text_bytes += sum(len(r.text.encode("utf-8")) for r in records)
        t0 = time.perf_counter()
        store.optimize()
        seconds["optimize"] = time.perf_counter() - t0
    disk = folder_bytes(folder)
    total = sum(seconds.values())

    lines = [
        f"Default encoder `{encoder.name}` (loaded in {load_s:.2f} s); {len(files)} PDFs, "
        f"{pages} pages ({ocr_pages} by OCR: {'tesseract' if ocr else 'off'}); {os.cpu_count()} CPUs.",
        "",
        "| stage | seconds | pages/s |",
        "|---|---:|---:|",
        *(f"| {name} | {s:.1f} | {pages / s:.0f} |" for name, s in seconds.items() if s > 0),
        f"| **total** | {total:.1f} | {pages / total:.1f} |",
        "",
        "| storage per page | bytes |",
        "|---|---:|",
        f"| store folder on disk (Qdrant Edge, after optimize) | {disk / pages:,.0f} |",
        f"| raw vectors (float32 multivector + pooled, sparse terms) | {raw / pages:,.0f} |",
        f"| page text (UTF-8, in the payload) | {text_bytes / pages:,.0f} |",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
