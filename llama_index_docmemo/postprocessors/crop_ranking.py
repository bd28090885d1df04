"""Which layout blocks of the pages read deserve a crop for this query: pure ranking and caps, no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from llama_index_docmemo.ingest.layout.blocks import LayoutBlock, area, iou
from llama_index_docmemo.text import keys

# Dense kinds first: a table or chart loses most when seen inside a full-page image.
KIND_PRIORITY: dict[str, float] = {"table": 0.3, "chart": 0.25, "figure": 0.15, "equation": 0.05}
# Two crops of one page this alike show the reader the same region: the second takes no slot.
SAME_CROP_IOU = 0.7


def terms(text: str) -> set[str]:
    """Match keys of ``text``'s content words and numbers (:mod:`llama_index_docmemo.text`).

    Numbers are kept: questions often quote a year or a value.
    """
    return set(keys(text))


def relevance(query_terms: set[str], block: LayoutBlock) -> float:
    """Share of the query's words found in the block's caption and text (caption words count double)."""
    if not query_terms:
        return 0.0
    caption = terms(block.caption)
    body = terms(block.text)
    hits = sum(1.0 if t in caption else 0.5 if t in body else 0.0 for t in query_terms)
    return min(1.0, hits / len(query_terms))


@dataclass(frozen=True)
class Candidate:
    """A block on a page node, with the page node's position in the retrieved list (0 = best)."""

    block: LayoutBlock
    page_rank: int
    node_index: int


def select_crops(
    query: str,
    candidates: Sequence[Candidate],
    *,
    max_crops: int,
    max_table_crops: int,
    max_per_page: int,
    kinds: Sequence[str],
) -> list[tuple[Candidate, float]]:
    """Best blocks first with their scores, under the caps (tables, total, per page).

    Score = lexical relevance + a kind bonus (tables, then charts, then figures) - a small penalty for pages
    lower in the retrieved list; on ties the larger block first (with no words to go by, as on an
    image-only slide, a page's main figure is its largest). A block whose box is nearly one already
    kept on its page (IoU >= :data:`SAME_CROP_IOU`) takes no slot.
    """
    qterms = terms(query)
    scored = [
        (c, relevance(qterms, c.block) + KIND_PRIORITY.get(c.block.kind, 0.0) - 0.01 * c.page_rank)
        for c in candidates
        if c.block.kind in kinds
    ]
    scored.sort(key=lambda cs: (-cs[1], -area(cs[0].block.bbox)))
    chosen: list[tuple[Candidate, float]] = []
    per_page: Counter[int] = Counter()
    tables = 0
    for cand, score in scored:
        if len(chosen) >= max_crops:
            break
        if per_page[cand.node_index] >= max_per_page:
            continue
        if any(
            kept.node_index == cand.node_index
            and iou(kept.block.bbox, cand.block.bbox) >= SAME_CROP_IOU
            for kept, _ in chosen
        ):
            continue
        if cand.block.kind == "table":
            if tables >= max_table_crops:
                continue
            tables += 1
        per_page[cand.node_index] += 1
        chosen.append((cand, score))
    return chosen


@dataclass(frozen=True)
class CropCaps:
    """The crop ranking's caps and size floor (a :class:`CropPostprocessor`'s ``caps``)."""

    max_crops: int
    max_table_crops: int
    max_per_page: int
    min_side: float
    kinds: tuple[str, ...]


def keep_crops(
    query: str, page_blocks: Sequence[Sequence[LayoutBlock]], caps: CropCaps
) -> list[tuple[int, LayoutBlock]]:
    """The crops kept for the pages read, best first, as (position of the page, block): blocks
    large enough, ranked and capped by :func:`select_crops`. The one rule for the engine's crop
    stage and the evaluation's box grounding."""
    candidates = [
        Candidate(block=block, page_rank=rank, node_index=rank)
        for rank, blocks in enumerate(page_blocks)
        for block in blocks
        if min(block.width, block.height) >= caps.min_side
    ]
    chosen = select_crops(
        query,
        candidates,
        max_crops=caps.max_crops,
        max_table_crops=caps.max_table_crops,
        max_per_page=caps.max_per_page,
        kinds=caps.kinds,
    )
    return [(cand.page_rank, cand.block) for cand, _ in chosen]
