"""What a query returns (the answer, the evidence nodes and the trace) and the pieces of a
round shown to the reader (page images, crops within the per-query cap).

Evidence pages may carry their rendered image (for an app to show): the same file the reader was
shown, rendered once per document version and page (``ingest/page_images.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.ingest.page_images import PageImage
from llama_index_docmemo.nodes import node_ref
from llama_index_docmemo.reasoning.base import CropView
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRecord, PageRef

logger = logging.getLogger(__name__)

NOT_ANSWERABLE = "Not answerable: the pages read do not contain this information."

PAGE_IMAGE_SIDE = 1500
"""Long side of the page images shown to a reader and attached to evidence nodes."""


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


def page_image(record: PageRecord, cache: Path) -> PageImage:
    """Where a page's image is cached (the reader and the evidence nodes share the file)."""
    return PageImage(record.source, record.doc_version, record.page, PAGE_IMAGE_SIDE, cache)


def crop_view(node: NodeWithScore) -> CropView:
    """A crop node as the reader sees it (its image loaded on demand)."""
    meta = node.node.metadata
    image_path = meta.get("image_path")

    def load_image() -> Path:
        return Path(image_path)

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
