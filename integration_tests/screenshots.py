"""Reading screenshots of the HTML pages: how many pixels show a cited box, or a colour.

A box is drawn by :func:`llama_index_docmemo.evidence.pages.draw_boxes`: outlined in ``OUTLINE``
and filled with ``FILL`` (translucent), so on a white page its pixels are the outline's colour or
the fill over white, whatever the scale the browser shows the thumbnail at.
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image

from llama_index_docmemo.evidence.pages import FILL, OUTLINE

Colour = Sequence[int]
Region = tuple[float, float, float, float]
"""left, top, width, height in CSS pixels (a ``getBoundingClientRect``)."""
_ALPHA = FILL[3] / 255
FILL_ON_WHITE = tuple(round(255 * (1 - _ALPHA) + c * _ALPHA) for c in FILL[:3])


def colour_pixels(
    image: Image.Image, colours: Sequence[Colour], region: Region | None = None, tolerance: int = 40
) -> int:
    """Pixels of ``image`` (in ``region``) within ``tolerance`` (summed over R, G, B) of one of
    ``colours``."""
    shown = image.convert("RGB")
    if region is not None:
        left, top, width, height = region
        shown = shown.crop((int(left), int(top), int(left + width), int(top + height)))
    return sum(
        1
        for r, g, b in shown.getdata()
        if any(abs(r - c[0]) + abs(g - c[1]) + abs(b - c[2]) < tolerance for c in colours)
    )


def box_pixels(image: Image.Image, region: Region | None = None) -> int:
    """Pixels of drawn citation boxes (outline or fill) in ``region`` of ``image``."""
    return colour_pixels(image, (OUTLINE[:3], FILL_ON_WHITE), region)
