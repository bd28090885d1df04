"""The crop stage runs under the query's clock: a layout analysis that takes long (a page of
many drawings) is cut at ``max_seconds``, sync and async, and the async one never holds the
event loop. And the drawing clusters it relies on take time linear in the drawings."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from fakes_docmemo import BagOfWordsEncoder, GoldReader
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from stores_docmemo import StoreMaker

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.ingest.layout.drawing_clusters import cluster_boxes
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

DOC = "report.pdf"
LIMIT = 1.5


class SlowLayout(BaseNodePostprocessor):
    """Stands in for the layout analysis of a page of 187,107 paths (minutes of CPU)."""

    seconds: float = 8.0

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        done = threading.Event()
        done.wait(self.seconds)
        return nodes


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker) -> Iterator[PageStore]:
    """Twenty pages alike (on Edge: what is read here is not the store's concern, so one backend)."""
    yield from store_maker.with_document(
        DOC, [f"page {i} about revenue and costs" for i in range(1, 21)]
    )


def engine(store: PageStore) -> DocMemoQueryEngine:
    return DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=GoldReader({PageRef(DOC, 3)}),
        crop_postprocessor=SlowLayout(),
        config=DocMemoConfig(max_seconds=LIMIT, adaptive_granularity=True),
        page_filter=PageFilter(doc_ids=(DOC,)),
        evidence_images=False,
    )


def test_a_slow_crop_stage_is_cut_at_the_deadline(store: PageStore) -> None:
    started = time.perf_counter()
    trace = engine(store).run("revenue and costs").trace
    assert time.perf_counter() - started < LIMIT + 1.5
    assert trace.stop_reason == "deadline"


def test_the_async_crop_stage_is_cut_too_and_the_loop_runs_on(store: PageStore) -> None:
    async def main() -> tuple[float, float]:
        ticks: list[float] = []

        async def tick() -> None:
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.02)

        ticker = asyncio.create_task(tick())
        started = time.perf_counter()
        result = await engine(store).arun("revenue and costs")
        took = time.perf_counter() - started
        ticker.cancel()
        assert result.trace.stop_reason == "deadline"
        return took, max(b - a for a, b in zip(ticks, ticks[1:], strict=False))

    took, stall = asyncio.run(main())
    assert took < LIMIT + 1.5 and stall < 0.5


def test_drawings_cluster_by_distance() -> None:
    page = (0.0, 0.0, 600.0, 800.0)
    boxes = [(10, 10, 20, 20), (22, 10, 30, 20), (24, 21, 40, 30), (100, 100, 110, 110)]
    found = sorted(cluster_boxes(boxes, page))
    assert found == [((10.0, 10.0, 40.0, 30.0), 3), ((100.0, 100.0, 110.0, 110.0), 1)]
    assert cluster_boxes([(10, 10, 11, 30)], page) == []  # thinner than the tolerance
    assert cluster_boxes([(-20, 10, 40, 30)], page) == []  # not inside the page


def test_clustering_a_hundred_thousand_drawings_takes_well_under_a_second() -> None:
    boxes = [
        (10 + (i % 300) * 1.9, 10 + (i // 300) * 1.9, 11 + (i % 300) * 1.9, 11 + (i // 300) * 1.9)
        for i in range(100_000)
    ]
    started = time.perf_counter()
    (cluster,) = cluster_boxes(boxes, (0.0, 0.0, 600.0, 800.0))
    assert time.perf_counter() - started < 1.0 and cluster[1] == 100_000
