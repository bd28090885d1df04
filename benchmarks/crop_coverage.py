"""How often a crop covers the gold evidence box (IoU >= threshold) on MMLongBench-Doc, with PyMuPDF detection.

For every question with ``evidence_bboxes`` whose sources include Table, Chart or Figure, and every gold box, the gold
page is analysed with :func:`detect_layout_pymupdf` under several option variants. Two rates are reported:

* detected: some table/chart/figure block on the gold page has IoU >= threshold with the gold box;
* selected: one of the crops :class:`CropPostprocessor`'s ranking keeps for that question (caps applied) does.

Both are given over the tuning and report halves of the documents (the evaluation's fixed rule,
:func:`llama_index_docmemo.evaluation.datasets.split_of`) and per evidence source, with Wilson intervals.

Usage: python benchmarks/crop_coverage.py --data /work/shared/data [--variants default] [--limit N]
       [--out report.md] [--json coverage.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pymupdf

from llama_index_docmemo.evaluation.datasets import load_dataset, split_of
from llama_index_docmemo.evaluation.grounding import (
    COVER_IOU,
    VISUAL_SOURCES,
    CropCaps,
    GoldBox,
    covers,
    gold_boxes,
    has_visual_boxes,
    kept_crops,
)
from llama_index_docmemo.evaluation.stats import wilson_interval
from llama_index_docmemo.ingest.layout import CROP_KINDS, DetectOptions, detect_layout_pymupdf
from llama_index_docmemo.postprocessors.crops import CropPostprocessor

HALVES = {"tune": "tuning", "report": "report"}
VARIANTS: dict[str, DetectOptions] = {
    "default": DetectOptions(),
    "use_layout": DetectOptions(table_use_layout=True),  # find_tables gated by the layout model
    "no_model": DetectOptions(layout_model=False),  # line tables, images, drawing clusters only
}


def default_caps() -> CropCaps:
    """The caps and size floor of a default :class:`CropPostprocessor` (what the engine keeps)."""
    crops = CropPostprocessor.model_fields
    return CropCaps(
        max_crops=crops["max_crops"].default,
        max_table_crops=crops["max_table_crops"].default,
        max_per_page=crops["max_crops_per_page"].default,
        min_side=crops["min_side_pt"].default,
        kinds=CROP_KINDS,
    )


Counts = dict[
    str, dict[str, dict[str, list[int]]]
]  # variant -> half -> group -> [n, detected, selected]


def run(
    data: Path, limit: int | None, variants: list[str], half: str = "all"
) -> tuple[Counts, dict[str, float]]:
    """Counts per variant, half and group, and seconds of detection per page per variant."""
    dataset = load_dataset(data / "mmlongbench-doc", check_pdfs=False)
    items = [
        item
        for item in dataset
        if has_visual_boxes(item) and half in ("all", HALVES[split_of(item.doc_id)])
    ]
    caps = default_caps()
    counts: Counts = {v: defaultdict(lambda: defaultdict(lambda: [0, 0, 0])) for v in variants}
    seconds: dict[str, float] = defaultdict(float)
    pages_done: dict[str, int] = defaultdict(int)
    by_doc: dict[str, list] = defaultdict(list)
    for item in items:
        by_doc[item.doc_id].append(item)
    n_boxes = 0
    for doc_name, doc_items in sorted(by_doc.items()):
        with pymupdf.open(str(dataset.pdf_path(doc_name))) as doc:
            sizes = [(page.rect.width, page.rect.height) for page in doc]
            golds: list[tuple[Any, GoldBox]] = [
                (item, gold)
                for item in doc_items
                for gold in gold_boxes(
                    item, lambda ref, sizes=sizes: sizes[min(ref.page, len(sizes)) - 1]
                )
                if 1 <= gold.ref.page <= doc.page_count
            ]
            if limit is not None:
                golds = golds[: max(0, limit - n_boxes)]
            n_boxes += len(golds)
            for variant in variants:
                blocks = {}
                for ref in sorted({gold.ref for _, gold in golds}, key=lambda r: r.page):
                    start = time.perf_counter()
                    blocks[ref] = detect_layout_pymupdf(doc, ref.page, VARIANTS[variant])
                    seconds[variant] += time.perf_counter() - start
                    pages_done[variant] += 1
                for item, gold in golds:
                    on_page = [
                        b
                        for b in blocks[gold.ref]
                        if b.kind in CROP_KINDS and min(b.width, b.height) >= caps.min_side
                    ]
                    detected = any(covers(b.bbox, gold.bbox) for b in on_page)
                    kept = kept_crops(item.question, [gold.ref], blocks.__getitem__, caps)
                    selected = any(covers(box, gold.bbox) for _, box in kept)
                    sources = [s for s in item.extra["evidence_sources"] if s in VISUAL_SOURCES]
                    for half in (HALVES[split_of(item.doc_id)], "all"):
                        for group in ("all", *sources):
                            row = counts[variant][half][group]
                            row[0] += 1
                            row[1] += int(detected)
                            row[2] += int(selected)
        print(f"done {doc_name}", file=sys.stderr, flush=True)
        if limit is not None and n_boxes >= limit:
            break
    return counts, {v: seconds[v] / max(1, pages_done[v]) for v in variants}


def rates(row: list[int]) -> dict[str, Any]:
    n, det, sel = row
    return {
        "n_boxes": n,
        "detected": det / n if n else None,
        "selected": sel / n if n else None,
        "selected_ci": list(wilson_interval(sel, n)),
    }


def half_entry(groups: dict[str, list[int]]) -> dict[str, Any]:
    """``{"n_boxes", "detected", "selected", "selected_ci", "by_source": {Table: {...}, ...}}``."""
    entry = rates(groups.get("all", [0, 0, 0]))
    entry["by_source"] = {s: rates(groups[s]) for s in VISUAL_SOURCES if s in groups}
    return entry


def to_json(counts: Counts, per_page: dict[str, float]) -> dict[str, Any]:
    """The first variant's halves at the top level; every variant under ``variants``."""
    variants = {
        v: {
            **{half: half_entry(counts[v][half]) for half in ("tuning", "report", "all")},
            "seconds_per_page": per_page[v],
        }
        for v in counts
    }
    first = next(iter(variants))
    return {"variant": first, "iou": COVER_IOU, **variants[first], "variants": variants}


def render(report: dict[str, Any]) -> str:
    lines = [
        f"# Crop coverage on MMLongBench-Doc (PyMuPDF detection, IoU >= {report['iou']})",
        "",
        f"{report['all']['n_boxes']} gold boxes of questions with Table/Chart/Figure evidence. detected: a "
        "table/chart/figure block on the gold page overlaps the gold box; selected: one of the crops kept for "
        "the question (CropPostprocessor ranking and caps) does. Halves: the evaluation's fixed split by "
        "document; intervals: Wilson 95%.",
        "",
        "| variant | half | group | n | detected | selected [95% CI] | s/page |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for variant, entry in report["variants"].items():
        for half in ("tuning", "report", "all"):
            if not entry[half]["n_boxes"]:
                continue
            groups = {"all": entry[half], **entry[half]["by_source"]}
            for group, r in groups.items():
                lo, hi = r["selected_ci"]
                lines.append(
                    f"| {variant} | {half} | {group} | {r['n_boxes']} | {r['detected']:.1%} | "
                    f"{r['selected']:.1%} [{lo:.1%}, {hi:.1%}] | {entry['seconds_per_page']:.2f} |"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.environ.get("DOCMEMO_DATA"), help="folder holding mmlongbench-doc/"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N gold boxes only")
    parser.add_argument(
        "--variants",
        default="default,use_layout,no_model",
        help=f"comma-separated detection variants among {sorted(VARIANTS)} (the first goes to the "
        "top level of --json)",
    )
    parser.add_argument(
        "--half",
        choices=("tuning", "report", "all"),
        default="all",
        help="documents of one half only (tune on tuning, report on report)",
    )
    parser.add_argument("--out", default=None, help="write the Markdown report here")
    parser.add_argument("--json", default=None, help="write the rates as JSON here")
    args = parser.parse_args()
    if not args.data:
        parser.error("--data or $DOCMEMO_DATA is required")
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose among {sorted(VARIANTS)}")
    report = to_json(*run(Path(args.data), args.limit, variants, args.half))
    markdown = render(report)
    print(markdown)
    for path, text in ((args.out, markdown), (args.json, json.dumps(report, indent=2) + "\n")):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
