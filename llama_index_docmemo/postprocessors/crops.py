"""Adaptive granularity as a LlamaIndex node postprocessor: add table/chart/figure crops of the pages retrieved.

A full page image dilutes a dense table or chart; a crop of it, with its caption and cell text, lets the reader see
it at a useful resolution. Works after any retriever whose nodes are DocMemo page nodes (metadata ``kind == "page"``
with ``doc_id``, ``page``, ``doc_version``, ``source``), and inside :class:`DocMemoQueryEngine`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymupdf
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout.blocks import CROP_KINDS, BBox, LayoutBlock
from llama_index_docmemo.ingest.layout.cache import LayoutCache
from llama_index_docmemo.ingest.layout.pymupdf_detect import DetectOptions, detect_layout_pymupdf
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS
from llama_index_docmemo.paths import default_cache_dir, write_atomically
from llama_index_docmemo.postprocessors.crop_ranking import CropCaps, keep_crops
from llama_index_docmemo.step_runtime import run_cpu

logger = logging.getLogger(__name__)
_HIDDEN_KEYS = ["image_path", "bbox", "doc_version", "source"]


class CropPostprocessor(BaseNodePostprocessor):
    """Append crop nodes (PNG on disk + caption/table text) for the blocks most related to the query.

    Layout comes from the :class:`LayoutCache` (filled by ``docmemo index --layout mineru|pymupdf``); a page with no
    stored layout is analysed with PyMuPDF on first use and stored. Crops are cached under
    ``<cache_dir>/crops/<doc_version>/``; rendering the same block again reuses the file.

    Args:
        cache_dir: root of the layout cache (``layout/``) and crop images (``crops/``).
        max_table_crops: table crops per call (the paper: 5 per query).
        max_crops: crops of any kind per call.
        max_crops_per_page: crops taken from one page node (5: a page of several figures, and a
            block spanning them, fits; ``max_crops`` still bounds the call).
        max_long_side: longest side of a crop image in pixels.
        dpi: rendering resolution before the long-side cap.
        min_side_pt: blocks narrower or shorter than this (PDF points) are not cropped.
        padding_pt: margin added around a block so borders and axis labels survive.
        kinds: block kinds that may become crops.
        detect: analyse pages missing from the layout cache with PyMuPDF (False: cached layout only).
    """

    cache_dir: str = Field(default_factory=lambda: str(default_cache_dir()))
    max_table_crops: int = Field(5, ge=0)
    max_crops: int = Field(8, ge=0)
    max_crops_per_page: int = Field(5, ge=1)
    max_long_side: int = Field(1500, ge=64)
    dpi: int = Field(200, ge=36)
    min_side_pt: float = Field(36.0, ge=0.0)
    padding_pt: float = Field(4.0, ge=0.0)
    kinds: tuple[str, ...] = CROP_KINDS
    detect: bool = True
    detect_options: DetectOptions = Field(default_factory=DetectOptions)

    _layout: LayoutCache = PrivateAttr()

    def model_post_init(self, __context: Any) -> None:
        self._layout = LayoutCache(Path(self.cache_dir) / "layout")

    @classmethod
    def class_name(cls) -> str:
        return "CropPostprocessor"

    @property
    def layout_cache(self) -> LayoutCache:
        """Where blocks are stored; pass it to ``index_layout`` to precompute a document's layout."""
        return self._layout

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = query_bundle.query_str if query_bundle is not None else ""
        pages = [(i, n) for i, n in enumerate(nodes) if n.node.metadata.get("kind") == "page"]
        docs: dict[str, pymupdf.Document] = {}
        try:
            kept = keep_crops(query, [self._blocks(node, docs) for _, node in pages], self.caps)
            crops = [
                crop
                for position, block in kept
                if (crop := self._crop_node(nodes[pages[position][0]], block, docs)) is not None
            ]
        finally:
            for doc in docs.values():
                doc.close()
        return list(nodes) + crops

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Layout analysis and crop rendering hold the GIL (PyMuPDF): done on the engine's CPU
        executor (:mod:`llama_index_docmemo.cpu`; a process pool shares the layout cache and
        crop files on disk, and needs a subclass importable by name), so the event loop runs
        on. The postprocessor itself goes, so a subclass's overrides hold on this path too."""
        query = query_bundle.query_str if query_bundle is not None else None
        return await run_cpu(crops_in_worker, self, nodes, query)

    @property
    def caps(self) -> CropCaps:
        """The ranking's caps, as the evaluation's box grounding applies them too."""
        return CropCaps(
            max_crops=self.max_crops,
            max_table_crops=self.max_table_crops,
            max_per_page=self.max_crops_per_page,
            min_side=self.min_side_pt,
            kinds=tuple(self.kinds),
        )

    def blocks_for(self, doc_version: str, source: str, page: int) -> list[LayoutBlock]:
        """Layout blocks of one page, for callers without a node (the evaluation's box grounding):
        from the cache, else detected with PyMuPDF and stored."""
        docs: dict[str, pymupdf.Document] = {}
        try:
            return self._page_blocks(doc_version, source, page, docs)
        finally:
            for doc in docs.values():
                doc.close()

    def _blocks(self, node: NodeWithScore, docs: dict[str, pymupdf.Document]) -> list[LayoutBlock]:
        """A page whose PDF cannot be read gets no crops: crops refine an answer, they must not break it."""
        meta = node.node.metadata
        version = str(meta.get("doc_version") or meta.get("doc_id", ""))
        if not Path(str(meta.get("source", ""))).is_file():  # indexed from text: said then
            return []
        try:
            return self._page_blocks(version, str(meta.get("source", "")), int(meta["page"]), docs)
        except (IngestError, *RENDER_ERRORS) as exc:  # e.g. FzErrorLimit on an oversized page
            logger.warning("no crops for %s page %s: %s", meta.get("doc_id"), meta.get("page"), exc)
            return []

    def _page_blocks(
        self, doc_version: str, source: str, page: int, docs: dict[str, pymupdf.Document]
    ) -> list[LayoutBlock]:
        cached = self._layout.get(doc_version, page)
        if cached is not None or not self.detect:
            return cached or []
        blocks = detect_layout_pymupdf(_open(source, docs), page, self.detect_options)
        self._layout.save(doc_version, {page: blocks}, source="pymupdf")
        return blocks

    def _crop_node(
        self, page_node: NodeWithScore, block: LayoutBlock, docs: dict[str, pymupdf.Document]
    ) -> NodeWithScore | None:
        meta = page_node.node.metadata
        doc_version = str(meta.get("doc_version") or meta.get("doc_id", ""))
        source = str(meta.get("source", ""))
        path = self._crop_path(doc_version, block)
        if not path.is_file():
            try:
                page = _open(source, docs)[block.page - 1]
                if not render_crop(
                    page, block.bbox, path, self.max_long_side, self.dpi, self.padding_pt
                ):
                    return None
            except (IngestError, OSError, *RENDER_ERRORS) as exc:
                logger.warning("no crop of %s page %s: %s", meta.get("doc_id"), block.page, exc)
                return None
        bbox = [round(v, 2) for v in block.bbox]
        label = block.caption or f"{block.kind} on page {block.page}"
        node = ImageNode(
            id_=f"crop:{doc_version}:{block.page}:{'-'.join(str(int(v)) for v in bbox)}",
            text=f"{block.kind.capitalize()} (page {block.page}): {label}\n{block.text}".strip(),
            image_path=str(path),
            metadata={  # the page's metadata (file, page, the app's keys), then the crop's own
                **meta,
                "kind": block.kind,
                "doc_version": doc_version,
                "source": source,
                "bbox": bbox,
                "caption": block.caption,
                "image_path": str(path),
                "layout_source": block.source,
            },
            relationships=dict(page_node.node.relationships),
            excluded_llm_metadata_keys=_HIDDEN_KEYS + ["layout_source"],
            excluded_embed_metadata_keys=_HIDDEN_KEYS + ["layout_source"],
        )
        return NodeWithScore(node=node, score=page_node.score)

    def _crop_path(self, doc_version: str, block: LayoutBlock) -> Path:
        box = "_".join(str(int(round(v))) for v in block.bbox)
        safe_version = "".join(c if c.isalnum() or c in "-_." else "_" for c in doc_version)
        return (
            Path(self.cache_dir)
            / "crops"
            / safe_version
            / f"p{block.page}_{box}_{self.max_long_side}.png"
        )


def crops_in_worker(
    postprocessor: CropPostprocessor, nodes: list[NodeWithScore], query: str | None
) -> list[NodeWithScore]:
    """``postprocessor``'s sync crops of ``nodes`` (a module-level function over picklable
    arguments, so a process pool may run it)."""
    bundle = QueryBundle(query) if query is not None else None
    return postprocessor._postprocess_nodes(nodes, bundle)


def render_crop(
    page: pymupdf.Page, bbox: BBox, path: Path, max_long_side: int, dpi: int, padding: float = 0.0
) -> bool:
    """Render ``bbox`` (points, padded and clipped to the page) to a PNG whose long side is <= ``max_long_side``.

    Returns False (writes nothing) when the clipped region is empty.
    """
    clip = (
        pymupdf.Rect(bbox[0] - padding, bbox[1] - padding, bbox[2] + padding, bbox[3] + padding)
        & page.rect
    )
    if clip.is_empty:
        return False
    scale = min(dpi / 72.0, max_long_side / max(clip.width, clip.height))
    pix = page.get_pixmap(clip=clip, matrix=pymupdf.Matrix(scale, scale), alpha=False)
    while max(pix.width, pix.height) > max_long_side:  # rounding can add a pixel
        scale *= max_long_side / max(pix.width, pix.height) - 1e-4
        pix = page.get_pixmap(clip=clip, matrix=pymupdf.Matrix(scale, scale), alpha=False)
    write_atomically(path, lambda tmp: pix.save(str(tmp)))
    return True


def _open(source: str, docs: dict[str, pymupdf.Document]) -> pymupdf.Document:
    if source not in docs:
        if not source or not Path(source).is_file():
            raise IngestError(
                source or "(empty source)", "page node's 'source' PDF not found; cannot crop it"
            )
        docs[source] = pymupdf.open(source)
    return docs[source]


__all__: Sequence[str] = ("CropPostprocessor", "render_crop")
