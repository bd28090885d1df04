"""Box grounding with the simulated reader: does what an engine cites cover every gold evidence box?

A page hit says the reader saw the right page; a cited region says where on it the evidence is. For the
questions with gold boxes (MMLongBench-Doc ``evidence_bboxes`` of Table/Chart/Figure evidence), each round's
pages get the crops :class:`~llama_index_docmemo.postprocessors.CropPostprocessor` keeps (same ranking and
caps for every engine), and the simulated reader labels each crop as it labels pages: a crop covering a gold
box is useful with probability 1 - fn, any other with probability fp. The crops labelled useful are the
cited boxes; the evidence chain is complete when they cover every gold box of the question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.simulated import uniform_draw
from llama_index_docmemo.evaluation.stats import bootstrap_ci
from llama_index_docmemo.ingest.layout.blocks import BBox, LayoutBlock, iou
from llama_index_docmemo.postprocessors.crop_ranking import CropCaps, keep_crops
from llama_index_docmemo.types import PageRef

VISUAL_SOURCES = ("Table", "Chart", "Figure")
COVER_IOU = 0.3  # a crop covers a gold box at IoU >= 0.3 (benchmarks/crop_coverage.py's threshold)


@dataclass(frozen=True)
class GoldBox:
    """One gold evidence region, in the page's own PDF points."""

    ref: PageRef
    bbox: BBox


def to_points(
    bbox: Sequence[float], annotated_size: Sequence[float] | None, page_size: tuple[float, float]
) -> BBox:
    """A gold box in the page's own points (rescaled when the annotation used another page size)."""
    x0, y0, x1, y1 = (float(v) for v in bbox)
    if not annotated_size:
        return (x0, y0, x1, y1)
    sx = page_size[0] / float(annotated_size[0])
    sy = page_size[1] / float(annotated_size[1])
    return (x0 * sx, y0 * sy, x1 * sx, y1 * sy)


def has_visual_boxes(item: QAItem) -> bool:
    """Whether the question has gold boxes and Table/Chart/Figure among its evidence sources."""
    sources = item.extra.get("evidence_sources") or []
    return bool(item.extra.get("evidence_bboxes")) and any(s in VISUAL_SOURCES for s in sources)


def gold_boxes(item: QAItem, page_size: Callable[[PageRef], tuple[float, float]]) -> list[GoldBox]:
    """The question's gold boxes in points; ``page_size`` gives a page's (width, height)."""
    out: list[GoldBox] = []
    for box in item.extra.get("evidence_bboxes") or []:
        ref = PageRef(item.doc_id, int(box["page"]))
        out.append(GoldBox(ref, to_points(box["bbox"], box.get("page_size"), page_size(ref))))
    return out


def covers(crop: BBox, gold: BBox) -> bool:
    return iou(crop, gold) >= COVER_IOU


def chain_complete(gold: Sequence[GoldBox], cited: Sequence[tuple[PageRef, BBox]]) -> bool:
    """Every gold box covered by a cited box on its page (no gold box: nothing to ground, False)."""
    return bool(gold) and all(
        any(ref == g.ref and covers(box, g.bbox) for ref, box in cited) for g in gold
    )


def crop_labelled_useful(
    ref: PageRef, bbox: BBox, gold: Sequence[GoldBox], *, fn: float, fp: float, seed: int, key: str
) -> bool:
    """The simulated reader's label of a crop: the page rule applied to regions (a reproducible draw)."""
    draw = uniform_draw(seed, key, ref.doc_id, ref.page, "crop", *(round(v, 1) for v in bbox))
    on_gold = any(ref == g.ref and covers(bbox, g.bbox) for g in gold)
    return draw >= fn if on_gold else draw < fp


def kept_crops(
    query: str,
    round_pages: Sequence[PageRef],
    blocks_of: Callable[[PageRef], list[LayoutBlock]],
    caps: CropCaps,
) -> list[tuple[PageRef, BBox]]:
    """The crops the ranking keeps for one round's pages (in the order shown), caps applied."""
    kept = keep_crops(query, [blocks_of(ref) for ref in round_pages], caps)
    return [(round_pages[position], block.bbox) for position, block in kept]


def cited_boxes(
    run: QuestionRun,
    item: QAItem,
    gold: Sequence[GoldBox],
    blocks_of: Callable[[PageRef], list[LayoutBlock]],
    caps: CropCaps,
    *,
    fn: float,
    fp: float,
    seed: int,
) -> list[tuple[PageRef, BBox]]:
    """Crops kept in any round of ``run`` that the simulated reader labels useful."""
    return [
        (ref, box)
        for round_pages in run.reads
        for ref, box in kept_crops(item.question, round_pages, blocks_of, caps)
        if crop_labelled_useful(ref, box, gold, fn=fn, fp=fp, seed=seed, key=item.qid)
    ]


def grounding_report(
    runs: Mapping[int, Mapping[str, Sequence[QuestionRun]]],
    items: Sequence[QAItem],
    blocks_of: Callable[[PageRef], list[LayoutBlock]],
    page_size: Callable[[PageRef], tuple[float, float]],
    *,
    caps: CropCaps,
    fn: float,
    fp: float,
) -> dict[str, Any]:
    """Per engine, the share of box-annotated questions with a complete evidence chain and its interval.

    ``runs[seed][engine]``; a question's value is its mean over the seeds (each seed draws its own crop
    labels), and the interval is the bootstrap over questions of :mod:`.stats`.
    """
    scoped = [item for item in items if has_visual_boxes(item)]
    golds = {item.qid: gold_boxes(item, page_size) for item in scoped}
    engines = list(dict.fromkeys(name for seed in runs for name in runs[seed]))
    out: dict[str, Any] = {"n_questions": len(scoped), "cover_iou": COVER_IOU, "engines": {}}
    for name in engines:
        by_seed = {seed: {r.qid: r for r in runs[seed].get(name, ())} for seed in sorted(runs)}
        values = []
        for item in scoped:
            per_seed = [
                chain_complete(
                    golds[item.qid],
                    cited_boxes(
                        found[item.qid],
                        item,
                        golds[item.qid],
                        blocks_of,
                        caps,
                        fn=fn,
                        fp=fp,
                        seed=seed,
                    ),
                )
                for seed, found in by_seed.items()
                if item.qid in found
            ]
            if per_seed:
                values.append(float(np.mean(per_seed)))
        lo, hi = bootstrap_ci(values)
        out["engines"][name] = {
            "complete_chain": float(np.mean(values)) if values else None,
            "ci": [lo, hi] if values else None,
            "n": len(values),
        }
    return out
