"""Regions of a page that is one picture (a scanned slide, an image-only deck), by whitespace cuts.

Such a page has no text layer, no drawings and a single image covering it, so the other signals see nothing to
crop. Its content still falls apart along the blank bands between a slide's title, its chart and its footer:
a recursive XY-cut over the "ink" mask (pixels far from the background colour) finds those blocks. Pure numpy
over the mask; :func:`ink_mask` is the only step that looks at pixels.
"""

from __future__ import annotations

import numpy as np

from llama_index_docmemo.ingest.layout.blocks import BBox


def ink_mask(pixels: np.ndarray, tolerance: int = 40) -> np.ndarray:
    """Pixels (H x W x channels, uint8) that differ from the page's background colour.

    The background is the page's most frequent colour (coarsely binned): the slide's own colour, or the
    card its content sits on, whose coloured margin then reads as a frame (see :func:`without_rules`).
    """
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    binned = pixels.reshape(-1, pixels.shape[2]) // 8
    colours, counts = np.unique(binned, axis=0, return_counts=True)
    background = colours[np.argmax(counts)] * 8 + 4
    distance = np.abs(pixels.astype(np.int16) - background).max(axis=2)
    return distance > tolerance


def blank_boxes(mask: np.ndarray, boxes: list[BBox], page_size: tuple[float, float]) -> None:
    """Clear, in place, the cells of ``mask`` under ``boxes`` (points on a page of ``page_size``)."""
    height, width = mask.shape
    sx, sy = width / page_size[0], height / page_size[1]
    for x0, y0, x1, y1 in boxes:
        mask[
            max(0, int(y0 * sy)) : max(0, int(np.ceil(y1 * sy))),
            max(0, int(x0 * sx)) : max(0, int(np.ceil(x1 * sx))),
        ] = False


def without_rules(mask: np.ndarray, share: float = 0.9) -> np.ndarray:
    """``mask`` with its page-wide rows and page-high columns cleared: a slide's frame, its header bar
    and separator rules join every block into one, while no figure spans the whole page."""
    out = mask.copy()
    out[mask.mean(axis=1) >= share, :] = False
    out[:, mask.mean(axis=0) >= share] = False
    return out


def _runs(profile: np.ndarray, min_gap: int) -> list[tuple[int, int]]:
    """Spans of ``profile`` holding ink, split where at least ``min_gap`` empty cells lie between."""
    filled = np.flatnonzero(profile)
    if filled.size == 0:
        return []
    spans: list[tuple[int, int]] = []
    start = prev = int(filled[0])
    for index in filled[1:]:
        index = int(index)
        if index - prev > min_gap:
            spans.append((start, prev + 1))
            start = index
        prev = index
    spans.append((start, prev + 1))
    return spans


def xy_cut(mask: np.ndarray, min_gap: int, depth: int = 4) -> list[tuple[int, int, int, int]]:
    """Blocks of ink (x0, y0, x1, y1 in mask cells) cut along blank bands of at least ``min_gap`` cells.

    Cuts alternate rows then columns, down to ``depth`` levels; a block no band splits is a leaf.
    """
    blocks: list[tuple[int, int, int, int]] = []

    def cut(y0: int, y1: int, x0: int, x1: int, level: int, horizontal: bool) -> None:
        region = mask[y0:y1, x0:x1]
        rows = _runs(region.any(axis=1), min_gap)
        if not rows:
            return
        top, bottom = rows[0][0], rows[-1][1]
        cols = _runs(region[top:bottom].any(axis=0), min_gap)
        left, right = cols[0][0], cols[-1][1]
        spans = rows if horizontal else cols
        if level >= depth or len(spans) == 1:
            other = cols if horizontal else rows
            if level < depth and len(other) > 1:
                cut(y0, y1, x0, x1, level + 1, not horizontal)
                return
            blocks.append((x0 + left, y0 + top, x0 + right, y0 + bottom))
            return
        for start, end in spans:
            if horizontal:
                cut(y0 + start, y0 + end, x0, x1, level + 1, False)
            else:
                cut(y0, y1, x0 + start, x0 + end, level + 1, True)

    cut(0, mask.shape[0], 0, mask.shape[1], 0, True)
    return blocks


def raster_regions(
    mask: np.ndarray,
    page_size: tuple[float, float],
    *,
    min_side: float,
    gap: float,
    fine_gap: float | None = None,
    recut_share: float = 0.25,
) -> list[BBox]:
    """XY-cut blocks of ``mask`` in page points, those with both sides at least ``min_side`` points.

    ``gap``: the narrowest blank band (points) that separates two regions. A block covering more
    than ``recut_share`` of the page is cut again along bands of ``fine_gap`` points, and its parts
    join it: a slide's panel of screenshots set close together is one block at ``gap``, yet a
    question may be about one of them.
    """
    height, width = mask.shape
    sx, sy = page_size[0] / width, page_size[1] / height
    cleared = without_rules(mask)
    cells = max(1, round(gap / max(sx, sy)))
    blocks = xy_cut(cleared, cells)
    if fine_gap is not None:
        fine = max(1, round(fine_gap / max(sx, sy)))
        for x0, y0, x1, y1 in list(blocks):
            if (x1 - x0) * (y1 - y0) > recut_share * width * height:
                parts = xy_cut(cleared[y0:y1, x0:x1], fine)
                if len(parts) > 1:
                    blocks += [(x0 + a, y0 + b, x0 + c, y0 + d) for a, b, c, d in parts]
    out: list[BBox] = []
    for x0, y0, x1, y1 in blocks:
        box = (x0 * sx, y0 * sy, x1 * sx, y1 * sy)
        if min(box[2] - box[0], box[3] - box[1]) >= min_side:
            out.append(box)
    return out
