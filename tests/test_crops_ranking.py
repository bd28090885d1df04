"""Crop choice (query overlap, kind priority, caps), block geometry and the on-disk layout cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout import LayoutBlock, LayoutCache, iou, normalize_kind
from llama_index_docmemo.postprocessors.crop_ranking import (
    Candidate,
    relevance,
    select_crops,
    terms,
)

KINDS = ("table", "chart", "figure")


def block(
    kind: str, caption: str = "", text: str = "", page: int = 1, y: float = 0.0
) -> LayoutBlock:
    """A 250 x 150 pt block ``y`` rows down (rows 160 pt apart, so no two blocks are one crop)."""
    top = 50 + 160 * y
    return LayoutBlock(
        page=page, kind=kind, bbox=(50, top, 300, top + 150), caption=caption, text=text
    )


def cands(*blocks: LayoutBlock, node_index: int = 0) -> list[Candidate]:
    return [Candidate(block=b, page_rank=node_index, node_index=node_index) for b in blocks]


def test_bbox_is_ordered_and_kinds_are_normalised() -> None:
    b = LayoutBlock(page=1, kind="table", bbox=(300, 200, 50, 50))
    assert b.bbox == (50.0, 50.0, 300.0, 200.0)
    assert (b.width, b.height) == (250.0, 150.0)
    assert [
        normalize_kind(k) for k in ("image", "picture", "interline_equation", "chart", "weird")
    ] == [
        "figure",
        "figure",
        "equation",
        "chart",
        "other",
    ]
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(1 / 3)
    assert iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0


def test_relevance_counts_caption_words_double() -> None:
    q = terms("What was the revenue of the North region in 2023?")
    assert q == terms("revenue North regions 2023")  # stop words out, one stem per word
    assert relevance(
        q, block("table", caption="Revenue by region, 2023", text="North 1200")
    ) == pytest.approx((1 + 1 + 1 + 0.5) / 4)
    assert relevance(q, block("table")) == 0.0


def test_query_overlap_orders_crops_then_kind() -> None:
    staff = block("chart", caption="Staff count by region", y=1)
    revenue = block("table", caption="Revenue by region", y=2)
    photo = block("figure", caption="Our headquarters", y=3)
    chosen = select_crops(
        "staff count per region",
        cands(photo, revenue, staff),
        max_crops=3,
        max_table_crops=5,
        max_per_page=3,
        kinds=KINDS,
    )
    assert [c.block for c, _ in chosen] == [staff, revenue, photo]
    # With no overlap at all, tables come first, then charts, then figures.
    chosen = select_crops(
        "",
        cands(photo, staff, revenue),
        max_crops=3,
        max_table_crops=5,
        max_per_page=3,
        kinds=KINDS,
    )
    assert [c.block.kind for c, _ in chosen] == ["table", "chart", "figure"]


def test_caps_tables_total_and_per_page() -> None:
    tables = [block("table", caption=f"Table {i}", y=i) for i in range(8)]
    chosen = select_crops(
        "table", cands(*tables), max_crops=10, max_table_crops=5, max_per_page=10, kinds=KINDS
    )
    assert len(chosen) == 5
    per_page = select_crops(
        "", cands(*tables), max_crops=10, max_table_crops=5, max_per_page=2, kinds=KINDS
    )
    assert len(per_page) == 2
    two_pages = cands(*tables[:4], node_index=0) + cands(*tables[4:], node_index=1)
    spread = select_crops(
        "", two_pages, max_crops=10, max_table_crops=5, max_per_page=2, kinds=KINDS
    )
    assert sorted(c.node_index for c, _ in spread) == [0, 0, 1, 1]
    charts = [block("chart", y=i) for i in range(6)]
    total = select_crops(
        "", cands(*charts), max_crops=4, max_table_crops=5, max_per_page=10, kinds=KINDS
    )
    assert len(total) == 4
    only_tables = select_crops(
        "",
        cands(*charts, tables[0]),
        max_crops=4,
        max_table_crops=5,
        max_per_page=9,
        kinds=("table",),
    )
    assert [c.block.kind for c, _ in only_tables] == ["table"]


def test_ties_go_to_the_larger_block_and_a_repeated_box_takes_no_slot() -> None:
    small = LayoutBlock(page=1, kind="figure", bbox=(50, 50, 150, 150))
    large = LayoutBlock(page=1, kind="figure", bbox=(50, 300, 450, 600))
    again = LayoutBlock(page=1, kind="figure", bbox=(55, 305, 450, 590))  # IoU 0.95 with large
    other = LayoutBlock(page=1, kind="figure", bbox=(300, 50, 420, 200))
    chosen = select_crops(
        "",
        cands(small, again, large, other),
        max_crops=3,
        max_table_crops=5,
        max_per_page=3,
        kinds=KINDS,
    )
    # again (smaller than large) is skipped and its slot goes to the next block by size
    assert [c.block for c, _ in chosen] == [large, other, small]
    # the same box on another page is another crop
    two_pages = cands(large, node_index=0) + cands(again, node_index=1)
    spread = select_crops(
        "", two_pages, max_crops=3, max_table_crops=5, max_per_page=3, kinds=KINDS
    )
    assert len(spread) == 2


def test_layout_cache_round_trip_and_merge(tmp_path: Path) -> None:
    cache = LayoutCache(tmp_path / "layout")
    assert cache.get("sha-1", 3) is None
    cache.save("sha-1", {3: [block("table", caption="T", page=3)], 4: []}, source="pymupdf")
    cache.save("sha-1", {5: [block("chart", page=5)]})
    again = LayoutCache(tmp_path / "layout")
    assert again.get("sha-1", 3)[0].caption == "T"
    assert again.get("sha-1", 4) == []  # analysed, nothing found: not recomputed
    assert again.get("sha-1", 5)[0].kind == "chart"
    assert again.get("sha-2", 3) is None  # another version of the file shares nothing
    assert json.loads(again.path_for("sha-1").read_text())["doc_version"] == "sha-1"


def test_layout_cache_corrupt_file_names_it(tmp_path: Path) -> None:
    cache = LayoutCache(tmp_path)
    cache.path_for("v").write_text("{not json")
    with pytest.raises(IngestError, match=r"v\.json.*corrupt"):
        cache.load("v")
    with pytest.raises(ValueError, match="doc_version"):
        cache.path_for("")
