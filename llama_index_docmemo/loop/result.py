"""What a query returns: the answer, the evidence nodes and the trace, built in one place.

Evidence pages may carry their rendered image (for an app to show); images are rendered once
per document version and page into the cache folder, written atomically so concurrent queries
never lose or half-read one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.nodes import node_ref
from llama_index_docmemo.paths import write_atomically
from llama_index_docmemo.reasoning.base import CropView
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRecord, PageRef

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger(__name__)

NOT_ANSWERABLE = "Not answerable: the pages read do not contain this information."

EVIDENCE_IMAGE_SIDE = 1500


@dataclass
class DocMemoResult:
    """The outcome of one question: answer, verdict, evidence nodes and the full trace."""

    answer: str
    status: str
    source_nodes: list[NodeWithScore]
    trace: QueryTrace

    def to_response(self) -> Response:
        return Response(
            response=self.answer,
            source_nodes=self.source_nodes,
            metadata={"docmemo": self.trace.model_dump(mode="json")},
        )


def render_evidence(records: Sequence[PageRecord], cache: Path) -> dict[PageRef, Path]:
    """PNG files of the pages of ``records`` whose PDF is on disk, rendered once per version and
    page (blocking: the async driver runs it off the event loop). A page MuPDF cannot render
    keeps its text and gets no image."""
    from llama_index_docmemo.ingest.pdf import render_page

    out: dict[PageRef, Path] = {}
    for record in records:
        if not record.source or not Path(record.source).is_file():
            continue
        path = cache / "pages" / f"{record.doc_version[:16]}-p{record.page}.png"
        if not path.is_file():
            try:
                image = render_page(record.source, record.page, EVIDENCE_IMAGE_SIDE)
            except IngestError as exc:
                logger.warning("no evidence image: %s", exc)
                continue
            write_atomically(path, lambda tmp, image=image: image.save(tmp, format="PNG"))
        out[record.ref] = path
    return out


def crop_view(node: NodeWithScore) -> CropView:
    """A crop node as the reader sees it (its image loaded on demand)."""
    meta = node.node.metadata
    image_path = meta.get("image_path")

    def load_image() -> Image:
        from PIL import Image as PILImage

        with PILImage.open(image_path) as image:
            image.load()
            return image

    return CropView(
        page=node_ref(node),
        kind=str(meta.get("kind", "crop")),
        bbox=tuple(meta.get("bbox", (0.0, 0.0, 0.0, 0.0))),  # type: ignore[arg-type]
        text=node.node.get_content(),
        load_image=load_image if image_path else None,
    )


def capped_crops(
    new: Sequence[NodeWithScore], earlier: Sequence[NodeWithScore], max_tables: int
) -> list[NodeWithScore]:
    """The crops among a round's ``new`` nodes, within the per-query cap on table crops."""
    tables_left = max_tables - sum(c.node.metadata.get("kind") == "table" for c in earlier)
    crops = []
    for node in new:
        kind = node.node.metadata.get("kind")
        if kind == "page" or (kind == "table" and tables_left <= 0):
            continue
        tables_left -= kind == "table"
        crops.append(node)
    return crops


def evidence_refs(
    useful: Sequence[PageRef], cited: Sequence[PageRef], read: set[PageRef]
) -> list[PageRef]:
    """Evidence pages: judged useful or cited by a note, and read (never a page merely read)."""
    return [r for r in dict.fromkeys([*useful, *cited]) if r in read]
