"""Regions of a page that is one picture: the ink mask and the XY-cut over it (pure numpy)."""

from __future__ import annotations

import numpy as np

from llama_index_docmemo.ingest.layout.raster_regions import (
    blank_boxes,
    ink_mask,
    raster_regions,
    without_rules,
    xy_cut,
)


def slide_mask() -> np.ndarray:
    """100 x 200 cells: a title band, a chart and a text block side by side, a footer line."""
    mask = np.zeros((100, 200), dtype=bool)
    mask[5:12, 20:180] = True  # title
    mask[25:80, 10:120] = True  # chart
    mask[30:40, 140:190] = True  # text, two lines 3 cells apart
    mask[43:50, 140:190] = True
    mask[92:95, 10:60] = True  # footer
    return mask


def test_xy_cut_finds_the_slide_blocks() -> None:
    blocks = sorted(xy_cut(slide_mask(), min_gap=5))
    assert blocks == sorted(
        [(20, 5, 180, 12), (10, 25, 120, 80), (140, 30, 190, 50), (10, 92, 60, 95)]
    )


def test_gaps_narrower_than_min_gap_do_not_split() -> None:
    # the 12-13 blank rows around the body no longer split it, and the title spans the column gap
    assert xy_cut(slide_mask(), min_gap=15) == [(10, 5, 190, 95)]
    two_lines = np.zeros((40, 40), dtype=bool)
    two_lines[5:10, 5:35] = two_lines[13:18, 5:35] = True
    assert xy_cut(two_lines, min_gap=5) == [(5, 5, 35, 18)]
    assert xy_cut(two_lines, min_gap=2) == [(5, 5, 35, 10), (5, 13, 35, 18)]
    assert xy_cut(np.zeros((10, 10), dtype=bool), min_gap=2) == []


def test_ink_is_what_differs_from_a_coloured_background() -> None:
    pixels = np.zeros((60, 80, 3), dtype=np.uint8)
    pixels[:] = (20, 40, 120)  # a dark blue slide
    pixels[10:20, 10:70] = (255, 255, 255)  # white title
    pixels[30:50, 20:40] = (30, 45, 125)  # a shade too close to the background to count
    mask = ink_mask(pixels)
    assert mask[10:20, 10:70].all()
    assert mask.sum() == 10 * 60
    grey = np.full((30, 30), 250, dtype=np.uint8)
    grey[5:10, 5:10] = 0
    assert ink_mask(grey).sum() == 25


def test_a_card_on_a_coloured_margin_is_the_background_and_the_margin_a_frame() -> None:
    pixels = np.full((100, 100, 3), (200, 30, 30), dtype=np.uint8)  # red margin
    pixels[10:90, 10:90] = 255  # the white card, most of the page
    pixels[30:60, 20:50] = 0  # a black chart on it
    mask = ink_mask(pixels)
    assert mask[30:60, 20:50].all() and not mask[70:90, 60:90].any()
    assert mask[:10].all()  # the margin is ink until the frame rule removes it
    assert xy_cut(without_rules(mask), min_gap=3) == [(20, 30, 50, 60)]


def test_rules_across_the_page_are_cleared_but_blocks_kept() -> None:
    mask = np.zeros((50, 50), dtype=bool)
    mask[0, :] = mask[:, 49] = True  # a frame's top and right edges
    mask[20:30, 10:40] = True  # a block 60% of the width
    cleared = without_rules(mask)
    assert not cleared[0].any() and not cleared[:, 49].any()
    assert cleared[20:30, 10:40].all() and cleared.sum() == 300


def test_regions_are_scaled_to_points_and_small_ones_dropped() -> None:
    # 100 x 200 cells over a 400 x 200 point page: 2 points a cell across, 2 down
    boxes = raster_regions(slide_mask(), (400.0, 200.0), min_side=20.0, gap=10.0)
    assert sorted(boxes) == sorted([(20.0, 50.0, 240.0, 160.0), (280.0, 60.0, 380.0, 100.0)])


def panel_mask() -> np.ndarray:
    """100 x 200 cells: four panels 5 cells apart in a 2 x 2 grid, and a small title 20 cells up."""
    mask = np.zeros((100, 200), dtype=bool)
    mask[2:8, 10:60] = True  # title
    for top in (28, 65):
        for left in (20, 105):
            mask[top : top + 32, left : left + 80] = True
    return mask


def test_a_large_block_is_cut_again_at_the_fine_gap_and_kept_beside_its_parts() -> None:
    # 1 point a cell: the 5-point gaps between panels are under gap=8, over fine_gap=3
    coarse = raster_regions(panel_mask(), (200.0, 100.0), min_side=4.0, gap=8.0)
    assert sorted(coarse) == [(10.0, 2.0, 60.0, 8.0), (20.0, 28.0, 185.0, 97.0)]
    fine = raster_regions(panel_mask(), (200.0, 100.0), min_side=4.0, gap=8.0, fine_gap=3.0)
    panels = [
        (float(left), float(top), left + 80.0, top + 32.0) for top in (28, 65) for left in (20, 105)
    ]
    assert sorted(fine) == sorted([*coarse, *panels])
    # a block under recut_share of the page is left whole
    assert sorted(
        raster_regions(
            panel_mask(), (200.0, 100.0), min_side=4.0, gap=8.0, fine_gap=3.0, recut_share=0.9
        )
    ) == sorted(coarse)


def test_blank_boxes_clears_the_cells_under_boxes_in_points() -> None:
    mask = np.ones((50, 100), dtype=bool)  # 2 points a cell on a 200 x 100 point page
    blank_boxes(mask, [(10.0, 10.0, 30.0, 21.0)], (200.0, 100.0))
    assert not mask[5:11, 5:15].any()
    assert mask.sum() == 50 * 100 - 6 * 10
