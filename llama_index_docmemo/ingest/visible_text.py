"""The text of a page a person can read: the text layer minus what the page hides.

A PDF can carry text nobody sees: white on white, a colour too close to what is under it, a size
under ~4 pt, fully transparent. Such text must not answer questions, nor verify an answer's
figure (``evidence/citations.py``), nor instruct the reader: it is dropped from the page's text
and from the text of its crops. Text outside the page or clipped away is already left out by
MuPDF's extraction. A light span, and a span over a filled area or an image (black text on a
black box), is judged against what the page renders there (one grey render of the region holding
those spans): white text on a dark table header stays, text the page paints over or on its own
colour goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pymupdf

MIN_SIZE = 4.0
"""Font size (points) under which text is taken as unreadable."""
LIGHT = 0.8
"""Luminance (0-1) from which a span's colour is checked against the page under it."""
MIN_CONTRAST = 48
"""Grey levels (of 255) a span's region must span to show anything."""
_DPI = 72
_FILLS = ("fill-path", "fill-image", "fill-imgmask", "fill-shade")
"""Kinds of MuPDF's bbox log that paint an area (text could vanish on or under one)."""

Span = tuple[int, int, int]  # (block, line, span) of a page dict


def _spans(page_dict: dict[str, Any]) -> Iterator[tuple[Span, dict[str, Any]]]:
    for b, block in enumerate(page_dict.get("blocks", ())):
        for n, line in enumerate(block.get("lines", ())):
            for s, span in enumerate(line.get("spans", ())):
                yield (b, n, s), span


def _luminance(colour: int) -> float:
    r, g, b = (colour >> 16) & 255, (colour >> 8) & 255, colour & 255
    return (0.299 * r + 0.587 * g + 0.114 * b) / 255


def hidden_spans(page: pymupdf.Page, page_dict: dict[str, Any]) -> set[Span]:
    """The spans of ``page_dict`` (``page.get_text("dict")``) a reader cannot see."""
    hidden: set[Span] = set()
    checked: list[tuple[Span, pymupdf.Rect]] = []
    filled: np.ndarray | None = None
    for key, span in _spans(page_dict):
        if not span.get("text", "").strip():
            continue
        if span.get("size", MIN_SIZE) < MIN_SIZE or span.get("alpha", 255) == 0:
            hidden.add(key)
            continue
        rect = pymupdf.Rect(span["bbox"])
        if _luminance(int(span.get("color", 0))) >= LIGHT:
            checked.append((key, rect))
            continue
        if filled is None:
            filled = _filled_areas(page)
        if _on_a_fill(rect, filled):
            checked.append((key, rect))
    if checked:
        hidden.update(_without_contrast(page, checked))
    return hidden


def _filled_areas(page: pymupdf.Page) -> np.ndarray:
    """The boxes (x0, y0, x1, y1 rows) of what the page paints as areas: fills and images."""
    boxes = [box for kind, box in page.get_bboxlog() if kind in _FILLS]
    return np.asarray(boxes, dtype=float).reshape(-1, 4)


def _on_a_fill(rect: pymupdf.Rect, filled: np.ndarray) -> bool:
    """Whether the middle of ``rect`` lies on one of the ``filled`` boxes."""
    x, y = (rect.x0 + rect.x1) / 2, (rect.y0 + rect.y1) / 2
    inside = (filled[:, 0] <= x) & (x <= filled[:, 2]) & (filled[:, 1] <= y) & (y <= filled[:, 3])
    return bool(inside.any())


def _without_contrast(page: pymupdf.Page, spans: list[tuple[Span, pymupdf.Rect]]) -> set[Span]:
    """The spans whose region renders as one flat tone (nothing to see there)."""
    region = pymupdf.Rect(spans[0][1])
    for _, rect in spans[1:]:
        region |= rect
    region &= page.rect
    if region.is_empty:
        return {key for key, _ in spans}
    pix = page.get_pixmap(clip=region, dpi=_DPI, colorspace=pymupdf.csGRAY, alpha=False)
    grey = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)
    scale = _DPI / 72
    flat: set[Span] = set()
    for key, rect in spans:
        x0 = max(int((rect.x0 - region.x0) * scale), 0)
        y0 = max(int((rect.y0 - region.y0) * scale), 0)
        x1 = min(int((rect.x1 - region.x0) * scale) + 1, pix.width)
        y1 = min(int((rect.y1 - region.y0) * scale) + 1, pix.height)
        tones = grey[y0:y1, x0:x1]
        if not tones.size or int(tones.max()) - int(tones.min()) < MIN_CONTRAST:
            flat.add(key)
    return flat


def _text_without(page_dict: dict[str, Any], hidden: set[Span]) -> str:
    """The page dict's text as ``get_text("text")`` lays it out, hidden spans left out."""
    blocks = []
    for b, block in enumerate(page_dict.get("blocks", ())):
        lines = []
        for n, line in enumerate(block.get("lines", ())):
            spans = enumerate(line.get("spans", ()))
            kept = [s["text"] for i, s in spans if (b, n, i) not in hidden]
            if "".join(kept).strip():
                lines.append("".join(kept))
        if lines:
            blocks.append("\n".join(lines) + "\n")
    return "".join(blocks)


def visible_text(
    page: pymupdf.Page,
    textpage: pymupdf.TextPage | None = None,
    page_dict: dict[str, Any] | None = None,
) -> str:
    """``page.get_text("text")`` (of ``textpage`` when given: a clip, flags) without the text a
    reader cannot see; exactly that text when the page hides none."""
    textpage = textpage or page.get_textpage(flags=pymupdf.TEXTFLAGS_TEXT)
    page_dict = page_dict or page.get_text("dict", textpage=textpage)
    hidden = hidden_spans(page, page_dict)
    if not hidden:
        return page.get_text("text", textpage=textpage)
    return _text_without(page_dict, hidden)


def visible_clip_text(page: pymupdf.Page, clip: pymupdf.Rect) -> str:
    """The visible text inside ``clip`` (a crop's box)."""
    return visible_text(page, page.get_textpage(clip=clip, flags=pymupdf.TEXTFLAGS_TEXT))
