"""How often a crop covers the gold evidence box (IoU >= threshold) on MMLongBench-Doc, with PyMuPDF detection.

For every question with ``evidence_bboxes`` whose sources include Table, Chart or Figure, and every gold box, the gold
page is analysed with :func:`detect_layout_pymupdf` under several option variants. Two rates are reported:

* detected: some table/chart/figure block on the gold page has IoU >= threshold with the gold box;
* selected: one of the crops :class:`CropPostprocessor`'s ranking keeps for that question (caps applied) does.

Usage: python benchmarks/crop_coverage.py --data /work/shared/data [--limit N] [--out report.md]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pymupdf

from llama_index_docmemo.ingest.layout import CROP_KINDS, DetectOptions, detect_layout_pymupdf, iou
from llama_index_docmemo.postprocessors.crop_ranking import Candidate, select_crops

VISUAL_SOURCES = ("Table", "Chart", "Figure")
VARIANTS: dict[str, DetectOptions] = {
    "default": DetectOptions(),  # layout model + find_tables(use_layout=False)
    "use_layout": DetectOptions(
        table_use_layout=True
    ),  # layout model + find_tables(use_layout=True)
    "no_model": DetectOptions(layout_model=False),  # line tables, images, drawing clusters only
}


def load_cases(data: Path) -> list[dict]:
    """(question, doc, page, gold box, source types) for every gold box of a visual-evidence question."""
    cases = []
    with open(data / "mmlongbench-doc" / "qa.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            sources = [s for s in q.get("evidence_sources") or [] if s in VISUAL_SOURCES]
            if not sources or not q.get("evidence_bboxes"):
                continue
            for box in q["evidence_bboxes"]:
                cases.append(
                    {
                        "qid": q["qid"],
                        "question": q["question"],
                        "doc": q["doc"],
                        "page": int(box["page"]),
                        "page_size": box.get("page_size"),
                        "bbox": tuple(float(v) for v in box["bbox"]),
                        "sources": sources,
                    }
                )
    return cases


def gold_in_points(case: dict, page: pymupdf.Page) -> tuple[float, float, float, float]:
    """The gold box in the page's own points (rescaled when the annotation used another page size)."""
    x0, y0, x1, y1 = case["bbox"]
    if case["page_size"]:
        sx = page.rect.width / float(case["page_size"][0])
        sy = page.rect.height / float(case["page_size"][1])
        return (x0 * sx, y0 * sy, x1 * sx, y1 * sy)
    return (x0, y0, x1, y1)


def run(data: Path, limit: int | None, threshold: float, variants: list[str]) -> tuple[str, dict]:
    cases = load_cases(data)[:limit] if limit else load_cases(data)
    chosen_variants = {v: VARIANTS[v] for v in variants}
    stats: dict[str, dict[str, list[int]]] = {
        v: defaultdict(lambda: [0, 0, 0]) for v in chosen_variants
    }  # variant -> group -> [n, detected, selected]
    seconds: dict[str, float] = defaultdict(float)
    pages_done: dict[str, int] = defaultdict(int)
    by_doc: dict[str, list[dict]] = defaultdict(list)
    for case in cases:
        by_doc[case["doc"]].append(case)
    for doc_name, doc_cases in sorted(by_doc.items()):
        with pymupdf.open(str(data / "mmlongbench-doc" / "pdfs" / doc_name)) as doc:
            for variant, opts in chosen_variants.items():
                blocks_by_page = {}
                for page_no in sorted({c["page"] for c in doc_cases}):
                    if not 1 <= page_no <= doc.page_count:
                        continue
                    start = time.perf_counter()
                    blocks_by_page[page_no] = detect_layout_pymupdf(doc, page_no, opts)
                    seconds[variant] += time.perf_counter() - start
                    pages_done[variant] += 1
                for case in doc_cases:
                    blocks = [
                        b
                        for b in blocks_by_page.get(case["page"], [])
                        if b.kind in CROP_KINDS and min(b.width, b.height) >= 36.0
                    ]
                    gold = gold_in_points(case, doc[case["page"] - 1])
                    detected = any(iou(b.bbox, gold) >= threshold for b in blocks)
                    chosen = select_crops(
                        case["question"],
                        [Candidate(block=b, page_rank=0, node_index=0) for b in blocks],
                        max_crops=8,
                        max_table_crops=5,
                        max_per_page=3,
                        kinds=CROP_KINDS,
                    )
                    selected = any(iou(c.block.bbox, gold) >= threshold for c, _ in chosen)
                    for group in ["all", *case["sources"]]:
                        row = stats[variant][group]
                        row[0] += 1
                        row[1] += int(detected)
                        row[2] += int(selected)
        print(f"done {doc_name}", file=sys.stderr, flush=True)
    return render(stats, seconds, pages_done, threshold, len(cases)), {
        v: {g: dict(zip(("n", "detected", "selected"), r, strict=True)) for g, r in s.items()}
        for v, s in stats.items()
    }


def render(
    stats: dict, seconds: dict[str, float], pages: dict[str, int], threshold: float, n: int
) -> str:
    lines = [
        f"# Crop coverage on MMLongBench-Doc (PyMuPDF detection, IoU >= {threshold})",
        "",
        f"{n} gold boxes of questions with Table/Chart/Figure evidence. detected: a table/chart/figure block on "
        "the gold page overlaps the gold box; selected: one of the crops kept for the question "
        "(CropPostprocessor ranking, caps 5 tables / 3 per page) does.",
        "",
        "| variant | group | n | detected | selected | s/page |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for variant, groups in stats.items():
        per_page = seconds[variant] / max(1, pages[variant])
        for group in ["all", *VISUAL_SOURCES]:
            if group not in groups:
                continue
            total, det, sel = groups[group]
            lines.append(
                f"| {variant} | {group} | {total} | {det / total:.1%} | {sel / total:.1%} | {per_page:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.environ.get("DOCMEMO_DATA"), help="folder holding mmlongbench-doc/"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N gold boxes only")
    parser.add_argument("--iou", type=float, default=0.3)
    parser.add_argument(
        "--variants",
        default="default,use_layout,no_model",
        help=f"comma-separated detection variants among {sorted(VARIANTS)}",
    )
    parser.add_argument(
        "--out", default=None, help="write the Markdown report here (and a .json beside it)"
    )
    args = parser.parse_args()
    if not args.data:
        parser.error("--data or $DOCMEMO_DATA is required")
    report, raw = run(Path(args.data), args.limit, args.iou, args.variants.split(","))
    print(report)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
        out.with_suffix(".json").write_text(json.dumps(raw, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
