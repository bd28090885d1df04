"""Clusters of vector drawings (charts drawn as paths) in time linear in the drawings.

PyMuPDF's ``Page.cluster_drawings`` merges rectangles pairwise until nothing changes: its time
grows with the square of the drawings (a page of 8,000 separate squares: 286 s; a dev paper's
page of 187,107 paths: minutes). Here the same rule (drawings closer than a tolerance belong
together) runs on a grid: each drawing's box, widened by half the tolerance, is painted onto a
grid of cells, the painted cells are labelled by connectivity, and each drawing joins the label
under its centre. As there, only drawings inside the page count and only clusters wider and
taller than the tolerance are kept. Pure: boxes in, boxes and member counts out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from llama_index_docmemo.ingest.layout.blocks import BBox

TOLERANCE = 3.0
"""Points between two drawings that still join them (``cluster_drawings``' default)."""
CELL = 1.5
"""Grid cell side in points (half the tolerance: a gap of a tolerance or more stays open)."""


def cluster_boxes(
    boxes: Sequence[BBox], page: BBox, tolerance: float = TOLERANCE
) -> list[tuple[BBox, int]]:
    """(cluster box, number of drawings in it) for ``boxes`` (PDF points) on ``page``."""
    x0, y0, x1, y1 = page
    rects = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    rects = rects[
        (rects[:, 0] >= x0) & (rects[:, 1] >= y0) & (rects[:, 2] <= x1) & (rects[:, 3] <= y1)
    ]
    if not len(rects):
        return []
    width = max(int(np.ceil((x1 - x0) / CELL)) + 2, 1)
    height = max(int(np.ceil((y1 - y0) / CELL)) + 2, 1)
    pad = tolerance / 2
    cols = np.clip(
        ((rects[:, [0, 2]] - x0 + pad * np.array([-1, 1])) / CELL).astype(int), 0, width - 1
    )
    rows = np.clip(
        ((rects[:, [1, 3]] - y0 + pad * np.array([-1, 1])) / CELL).astype(int), 0, height - 1
    )
    painted = np.zeros((height + 1, width + 1), dtype=np.int32)  # a 2-D difference array
    np.add.at(painted, (rows[:, 0], cols[:, 0]), 1)
    np.add.at(painted, (rows[:, 0], cols[:, 1] + 1), -1)
    np.add.at(painted, (rows[:, 1] + 1, cols[:, 0]), -1)
    np.add.at(painted, (rows[:, 1] + 1, cols[:, 1] + 1), 1)
    covered = painted.cumsum(axis=0).cumsum(axis=1)[:height, :width] > 0
    labels, count = ndimage.label(covered, structure=np.ones((3, 3), dtype=bool))
    centre_rows = (rows[:, 0] + rows[:, 1]) // 2
    centre_cols = (cols[:, 0] + cols[:, 1]) // 2
    member = labels[centre_rows, centre_cols]
    order = np.argsort(member, kind="stable")
    member, rects = member[order], rects[order]
    starts = np.flatnonzero(np.r_[True, member[1:] != member[:-1]])
    counts = np.diff(np.r_[starts, len(member)])
    low = np.minimum.reduceat(rects[:, :2], starts)
    high = np.maximum.reduceat(rects[:, 2:], starts)
    return [
        ((float(a[0]), float(a[1]), float(b[0]), float(b[1])), int(n))
        for a, b, n, label in zip(low, high, counts, member[starts], strict=True)
        if label and b[0] - a[0] > tolerance and b[1] - a[1] > tolerance
    ]
