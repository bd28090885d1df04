"""Ingest throughput serial vs Ray, time per stage, bytes per page, and a sizing table.

Usage:
    python benchmarks/ingest.py --data DIR [--limit-docs N] [--ocr auto|off]
        [--runs serial,ray1,ray2] [--encoder default|tiny-colqwen] [--image-long-side 1500]
        [--gpu NAME=SECONDS ...] [--out FILE.md]

DIR is a folder of PDFs, a set folder holding pdfs/, or the data root (default $DOCMEMO_DATA; its
mmlongbench-doc/pdfs is used); ``--limit-docs N`` takes the N PDFs with the fewest pages (ties by
name), as the Ray tests do. Each run indexes every file with ``DocumentIndexer`` into a fresh
Qdrant Edge store (the single writer); ``rayK`` runs it on a local Ray cluster (all CPUs of this
machine) with K encoder workers. Pages/s is over the whole call (Ray's actor start-up included,
the cluster's start reported apart); the stage seconds are summed over documents, so with
parallel workers they add up to more than the wall time. The sizing table scales the measured
per-page CPU costs to 1M and 10M pages; the GPU encode time per page is an input (``--gpu``,
default: ColPali's published L4 figure and an H100 scaled from it by FLOPs), never measured here.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pymupdf

from llama_index_docmemo.indexing import DocumentIndexer, IndexReport
from llama_index_docmemo.indexing.index_report import STAGES
from llama_index_docmemo.store.edge import EdgePageStore
from llama_index_docmemo.types import PageEmbedding, PageInput, PageRef

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.base import PageEncoder

ROOT = Path(__file__).resolve().parents[1]
COLQWEN_PAGE_BYTES = 768 * 128 * 2 + 128 * 4  # float16 multivector + float32 pooled vector
EDGE_COLQWEN_WRITE_S = 1 / 64  # benchmarks/store_scale.py: 64 pages/s at 768 x 128-d, 2 cores


def pdf_files(root: Path, limit: int | None) -> list[Path]:
    for folder in (root, root / "pdfs", root / "mmlongbench-doc" / "pdfs"):
        files = sorted(folder.glob("*.pdf"))
        if files:
            break
    else:
        sys.exit(f"{root}: no PDF files there, in pdfs/, or in mmlongbench-doc/pdfs/")
    if limit is None:
        return files
    sized = []
    for path in files:
        with pymupdf.open(path) as doc:
            sized.append((doc.page_count, path.name, path))
    return [path for _, _, path in sorted(sized)[:limit]]


def tiny_colqwen() -> PageEncoder:
    """The tiny random ColQwen2.5 (tests/colqwen_tiny.py): real rendering and processor work,
    meaningless vectors and model cost."""
    sys.path.insert(0, str(ROOT))
    from llama_index_docmemo.encoders.colqwen import ColQwenEncoder
    from tests.colqwen_tiny import tiny_model, tiny_processor

    processor = tiny_processor()
    return ColQwenEncoder.from_model(
        tiny_model(processor), processor, name="colqwen2.5-tiny", batch_size=16
    )


def default() -> PageEncoder:
    from llama_index_docmemo.encoders import default_encoder

    return default_encoder()


ENCODERS = {"default": default, "tiny-colqwen": tiny_colqwen}


def folder_bytes(folder: Path) -> int:
    """Allocated size on disk (sparse pre-allocated files count only what they use)."""
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def vector_bytes(embedding: PageEmbedding) -> int:
    """float32 dense vectors plus 4-byte index + 4-byte weight per sparse term."""
    sparse = 8 * len(embedding.sparse.indices) if embedding.sparse is not None else 0
    return embedding.multivector.nbytes + embedding.pooled.nbytes + sparse


def run_once(
    name: str, files: list[Path], encoder: PageEncoder, args: argparse.Namespace, folder: Path
) -> IndexReport:
    executor = None
    if name.startswith("ray"):
        from llama_index_docmemo.distributed import RayExecutor

        executor = RayExecutor(workers=int(name[3:]), encoder=ENCODERS[args.encoder])
    with EdgePageStore(
        folder, encoder_name=encoder.name, dim=encoder.dim, sparse=encoder.sparse
    ) as store:
        indexer = DocumentIndexer(
            store, encoder, ocr=args.ocr, image_long_side=args.image_long_side
        )
        report = indexer.index_paths(files, executor=executor)
        store.optimize()
    if not report.ok:
        print(report.summary(), file=sys.stderr)
    return report


def storage_lines(folder: Path, pages: int, files: list[Path], encoder: PageEncoder) -> list[str]:
    """Disk per page of the serial store; for a text encoder also raw vector and text bytes over
    a sample of pages (an image encoder's sizes here are the tiny model's, meaningless)."""
    from llama_index_docmemo.ingest.pdf import read_pdf

    lines = [
        "| storage per page | bytes |",
        "|---|---:|",
        f"| store folder on disk (Qdrant Edge, after optimize) | {folder_bytes(folder) / pages:,.0f} |",
    ]
    if encoder.modality != "text":
        return lines
    sample = read_pdf(files[0]).pages[:50]
    embeddings = encoder.encode_pages([PageInput(PageRef("x", p.page), p.text) for p in sample])
    raw = sum(vector_bytes(e) for e in embeddings) / len(sample)
    text = sum(len(p.text.encode("utf-8")) for p in sample) / len(sample)
    return [
        *lines,
        f"| raw vectors (float32 multivector + pooled, sparse terms; {len(sample)} pages of "
        f"{files[0].name}) | {raw:,.0f} |",
        f"| page text (UTF-8, in the payload; same pages) | {text:,.0f} |",
    ]


GPU_ESTIMATES = (
    "L4=0.39",  # ColPali's published indexing time a page on one NVIDIA L4
    "H100=0.048",  # ~8.6 TFLOP a page at the same ~18% of peak (989 bf16 TFLOP/s) as that L4 figure
)


def sizing_lines(serial: IndexReport, args: argparse.Namespace) -> list[str]:
    """1M / 10M pages on N GPUs from this run's per-page CPU costs and the given GPU costs."""
    seconds = serial.stage_seconds
    pages = serial.pages
    ocr_share = serial.ocr_pages / pages
    ocr_per_page = seconds["ocr"] / serial.ocr_pages if serial.ocr_pages else 0.0
    render = seconds["render"] / pages
    cpu_ocr = (seconds["parse"] + seconds["schema"] + seconds["ocr"]) / pages + render
    cpu_plain = cpu_ocr - seconds["ocr"] / pages
    gpus = [(name, float(value)) for name, _, value in (g.partition("=") for g in args.gpu)]
    lines = [
        f"Per page, measured here (serial run, {pages} pages): parse {seconds['parse'] / pages:.4f} s, "
        f"schema {seconds['schema'] / pages:.4f} s, OCR {ocr_per_page:.2f} s on the "
        f"{ocr_share:.1%} of pages without a text layer, render {render:.4f} s "
        f"(long side {args.image_long_side} px{'' if render else ': none, a text encoder'}): "
        f"{cpu_ocr:.4f} CPU-core seconds a page with OCR, {cpu_plain:.4f} without (``--ocr off``, "
        "a VLM reading the page images). GPU encode a page, **estimates, not measured**: "
        + ", ".join(f"{name} {value} s" for name, value in gpus)
        + f". Single Qdrant Edge writer, ColQwen-sized points: {EDGE_COLQWEN_WRITE_S:.4f} s a "
        f"page (benchmarks/store_scale.py, 2 cores). {args.cores_per_gpu} CPU cores per GPU; "
        "the stages overlap (Ray pipelines them), so the wall time is the slower of GPUs and CPUs.",
        "",
        "| pages | GPU | GPUs | GPU hours | CPU core-hours, OCR / none | wall hours, OCR / none "
        "| one embedded writer, hours | vectors (float16) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for total in (1_000_000, 10_000_000):
        for name, per_page in gpus:
            for count in (1, 8, 32):
                gpu_hours = total * per_page / 3600
                cpu_hours = [total * cpu / 3600 for cpu in (cpu_ocr, cpu_plain)]
                walls = [max(gpu_hours, h / args.cores_per_gpu) / count for h in cpu_hours]
                writer = total * EDGE_COLQWEN_WRITE_S / 3600
                lines.append(
                    f"| {total:,} | {name} | {count} | {gpu_hours:,.0f} | "
                    f"{cpu_hours[0]:,.0f} / {cpu_hours[1]:,.0f} | {walls[0]:,.1f} / {walls[1]:,.1f} "
                    f"| {writer:,.0f} | {total * COLQWEN_PAGE_BYTES / 1e12:.1f} TB |"
                )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=os.environ.get("DOCMEMO_DATA"))
    parser.add_argument("--ocr", choices=["auto", "off"], default="auto")
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument("--runs", default="serial,ray1,ray2")
    parser.add_argument("--encoder", choices=sorted(ENCODERS), default="default")
    parser.add_argument("--image-long-side", type=int, default=1500)
    parser.add_argument(
        "--gpu",
        action="append",
        default=None,
        metavar="NAME=SECONDS",
        help=f"GPU encode seconds a page for the sizing table (default {', '.join(GPU_ESTIMATES)})",
    )
    parser.add_argument("--cores-per-gpu", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.gpu = args.gpu or list(GPU_ESTIMATES)
    if args.data is None:
        parser.error("--data DIR (or $DOCMEMO_DATA) is required")
    runs = args.runs.split(",")
    if runs[0] != "serial":
        parser.error("--runs starts with serial (the baseline of the ratio)")
    files = pdf_files(Path(args.data), args.limit_docs)

    started = time.perf_counter()
    encoder = ENCODERS[args.encoder]()
    load_s = time.perf_counter() - started
    cluster_s = None
    if any(name.startswith("ray") for name in runs):
        import ray

        started = time.perf_counter()
        ray.init(
            include_dashboard=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}},
        )
        cluster_s = time.perf_counter() - started
    scratch = Path(tempfile.mkdtemp(prefix="docmemo-ingest-"))
    reports = {name: run_once(name, files, encoder, args, scratch / name) for name in runs}
    serial = reports["serial"]

    lines = [
        f"Encoder `{encoder.name}` (loaded in {load_s:.2f} s); {len(files)} PDFs, {serial.pages} "
        f"pages ({serial.ocr_pages} by OCR: {args.ocr}); {os.cpu_count()} CPUs"
        + (
            f"; local Ray cluster started in {cluster_s:.1f} s (not counted below)."
            if cluster_s
            else "."
        ),
        "",
        "| run | seconds | pages/s | vs serial | " + " | ".join(f"{s} s" for s in STAGES) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(STAGES),
    ]
    for name, report in reports.items():
        stages = " | ".join(f"{report.stage_seconds[s]:.1f}" for s in STAGES)
        lines.append(
            f"| {name} | {report.seconds:.1f} | {report.pages / report.seconds:.1f} | "
            f"{serial.seconds / report.seconds:.2f}x | {stages} |"
        )
    lines += ["", *storage_lines(scratch / "serial", serial.pages, files, encoder)]
    lines += ["", *sizing_lines(serial, args)]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
