"""Layout blocks: the regions of a page (table, figure, chart, ...) that crops are cut from.

Every layout source (MinerU of any generation, PyMuPDF detection) produces the same model, in PDF points with a
top-left origin, so the crop postprocessor never needs to know where the blocks came from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

BBox = tuple[float, float, float, float]

# Kinds worth cutting out for the reader: dense regions that a full page image dilutes.
CROP_KINDS: tuple[str, ...] = ("table", "chart", "figure")

_KIND_ALIASES: dict[str, str] = {
    "table": "table",
    "table_body": "table",
    "image": "figure",
    "image_body": "figure",
    "picture": "figure",
    "figure": "figure",
    "chart": "chart",
    "chart_body": "chart",
    "equation": "equation",
    "interline_equation": "equation",
    "formula": "equation",
    "caption": "caption",
    "table_caption": "caption",
    "image_caption": "caption",
    "chart_caption": "caption",
    "figure_caption": "caption",
    "title": "title",
    "doc_title": "title",
    "paragraph_title": "title",
    "section-header": "title",
    "text": "text",
    "list": "text",
    "list-item": "text",
    "index": "text",
}


def normalize_kind(raw: str) -> str:
    """Map a source's block type (MinerU ``image``, PyMuPDF ``picture``...) to one vocabulary."""
    return _KIND_ALIASES.get(raw.strip().lower(), "other")


class LayoutBlock(BaseModel):
    """One region of one page.

    Args:
        page: 1-based page number.
        kind: table | chart | figure | equation | caption | title | text | other.
        bbox: (x0, y0, x1, y1) in PDF points, origin at the top-left of the page.
        caption: caption text found for the block (may be empty).
        text: plain text of the block (table cells, chart labels, equation LaTeX).
        html: table HTML when the source extracted it.
        source: which detector produced it (``mineru-4``, ``mineru-2``, ``magic-pdf-1``, ``pymupdf``).
    """

    model_config = ConfigDict(frozen=True)

    page: int
    kind: str
    bbox: BBox
    caption: str = ""
    text: str = ""
    html: str = ""
    source: str = ""

    @field_validator("bbox")
    @classmethod
    def _ordered(cls, value: BBox) -> BBox:
        x0, y0, x1, y1 = (float(v) for v in value)
        return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))

    @property
    def width(self) -> float:
        return self.bbox[2] - self.bbox[0]

    @property
    def height(self) -> float:
        return self.bbox[3] - self.bbox[1]


def area(b: BBox) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def intersection(a: BBox, b: BBox) -> float:
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def iou(a: BBox, b: BBox) -> float:
    """Intersection over union of two boxes (0 when either is empty)."""
    inter = intersection(a, b)
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def containment(inner: BBox, outer: BBox) -> float:
    """Share of ``inner``'s area that lies inside ``outer``."""
    a = area(inner)
    return intersection(inner, outer) / a if a > 0 else 0.0


def union_box(a: BBox, b: BBox) -> BBox:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def scale_box(b: BBox, sx: float, sy: float) -> BBox:
    """Scale a box from a normalised frame (0-1, 0-1000) to points: x by ``sx``, y by ``sy``."""
    return (b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy)
