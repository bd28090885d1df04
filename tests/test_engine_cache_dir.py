"""The engine's parts follow what it is given: its ``cache_dir`` reaches the crops and the
reranker's page images, and a CropPostprocessor subclass's override holds on the async path."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fakes_docmemo import BagOfWordsEncoder
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_docmemo import DocMemoConfig, DocMemoQueryEngine
from llama_index_docmemo.postprocessors.crops import CropPostprocessor
from llama_index_docmemo.postprocessors.rerank import LLMReranker, _page_image
from llama_index_docmemo.store.client import QdrantClientPageStore


def test_the_engines_cache_dir_reaches_its_crops_and_its_reranker(tmp_path: Path) -> None:
    encoder = BagOfWordsEncoder()
    store = QdrantClientPageStore(location=":memory:", encoder_name=encoder.name, dim=8)
    try:
        engine = DocMemoQueryEngine.from_defaults(
            store,
            encoder,
            llm=MockLLM(max_tokens=8),
            config=DocMemoConfig(llm_rerank=True),
            cache_dir=tmp_path / "cache",
        )
    finally:
        store.close()
    reranker = engine.retriever.reranker
    assert isinstance(reranker, LLMReranker) and isinstance(
        engine.crop_postprocessor, CropPostprocessor
    )
    assert Path(engine.crop_postprocessor.cache_dir) == engine.cache_dir == tmp_path / "cache"
    node = NodeWithScore(
        node=TextNode(text="p", metadata={"source": "a.pdf", "doc_version": "v1", "page": 3}),
        score=1.0,
    )
    image = _page_image(node, reranker.image_side, Path(reranker.cache_dir))
    assert image is not None and image.path.is_relative_to(tmp_path / "cache" / "pages")


class MarkingCrops(CropPostprocessor):
    """A subclass that adds its own node: its override must run on both paths."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return [*nodes, NodeWithScore(node=TextNode(text="marked"), score=0.0)]


def test_a_subclass_override_holds_on_the_async_crop_path(tmp_path: Path) -> None:
    crops = MarkingCrops(cache_dir=str(tmp_path))
    page = NodeWithScore(node=TextNode(text="page", metadata={"kind": "page"}), score=1.0)
    synced = crops.postprocess_nodes([page], query_str="q")
    awaited = asyncio.run(crops.apostprocess_nodes([page], query_str="q"))
    assert [n.node.get_content() for n in synced] == ["page", "marked"]
    assert [n.node.get_content() for n in awaited] == ["page", "marked"]
