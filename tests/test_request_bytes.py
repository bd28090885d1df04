"""Every path that puts several images in one request keeps them within its byte budget: the
reader (pages and crops together), the reranker and the page summaries."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from fakes_docmemo import ScriptedChatLLM
from llama_index.core.base.llms.types import ImageBlock
from llama_index.core.schema import NodeWithScore
from PIL import Image

from llama_index_docmemo.ingest.summaries import VLMPageSummarizer
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.nodes import page_node
from llama_index_docmemo.postprocessors.rerank import LLMReranker
from llama_index_docmemo.readers.base import CropView, PageView, ReaderInput
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.types import PageInput, PageRecord, PageRef


def noise(seed: int) -> Image.Image:
    """A page JPEG cannot squeeze (random pixels)."""
    return Image.frombytes("RGB", (580, 750), random.Random(seed).randbytes(580 * 750 * 3))


def image_bytes(llm: ScriptedChatLLM) -> int:
    """Base64 bytes of the images of the LLM's first request."""
    messages, _ = llm.calls[0]
    blocks = [b for m in messages for b in m.blocks if isinstance(b, ImageBlock)]
    return sum(len(b.image or b"") for b in blocks)


def read(budget: int | None) -> ScriptedChatLLM:
    llm = ScriptedChatLLM(default='{"status": "need_more"}')
    pages = [PageView(PageRef("r.pdf", p), "", load_image=lambda p=p: noise(p)) for p in (1, 2, 3)]
    crops = [CropView(PageRef("r.pdf", 1), "table", (0, 0, 1, 1), load_image=lambda: noise(9))]
    inp = ReaderInput(question="q?", query="q", pages=pages, crops=crops)
    VLMReader(llm, images=True, max_image_bytes=budget).read(inp)
    return llm


def rerank(budget: int | None) -> ScriptedChatLLM:
    llm = ScriptedChatLLM(default='{"pages": [1]}')
    records = [PageRecord("r.pdf", "v1", p, 9, f"text {p}", "") for p in range(1, 5)]
    nodes = [NodeWithScore(node=page_node(r), score=0.5) for r in records]
    reranker = LLMReranker(llm=llm, top_n=2, images=True, max_image_bytes=budget)
    views = reranker._views(nodes)
    for view in views:  # the pages' images, as a store's rendered pages would give them
        object.__setattr__(view, "load_image", lambda p=view.ref.page: noise(p))
    reranker._views = lambda _nodes: views  # type: ignore[method-assign]
    reranker.postprocess_nodes(nodes, query_str="q")
    return llm


def summarize(budget: int | None) -> ScriptedChatLLM:
    llm = ScriptedChatLLM(default='{"summaries": []}')
    pages = [
        PageInput(PageRef("r.pdf", p), "t", load_image=lambda p=p: noise(p)) for p in (1, 2, 3)
    ]
    schema = DocumentSchema(doc_id="r.pdf", doc_version="v", n_pages=3)
    VLMPageSummarizer(llm, images=True, batch_size=3, max_image_bytes=budget)(schema, pages)
    return llm


@pytest.mark.parametrize("path", [read, rerank, summarize], ids=["reader", "reranker", "summaries"])
def test_a_request_s_images_stay_within_the_byte_budget(
    path: Callable[[int | None], ScriptedChatLLM],
) -> None:
    unbudgeted = image_bytes(path(None))
    budget = unbudgeted // 2
    budgeted = path(budget)
    assert 0 < image_bytes(budgeted) <= budget < unbudgeted
