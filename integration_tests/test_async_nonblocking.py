"""``aquery`` never blocks the event loop, and concurrent queries never lose a cached file.

Eight concurrent ``aquery`` calls over a real embedded store (Qdrant Edge on disk, the demo
report and a second generated report, the CPU encoder) read with ``QwenVL`` over HTTP from a
scripted OpenAI-compatible server running in a process of its own, as vLLM would: page images,
crops of tables and evidence images are rendered on every round. A heartbeat coroutine ticking
every 10 ms measures the longest the event loop went without running it, from the engine's
first query on (no warm-up).

Two things the package does not control are kept out of the measure, and said: the time the
operating system left the loop's thread waiting for a core (a loaded CI machine; read from
``/proc/thread-self/schedstat`` where Linux has it), and the interpreter's full garbage
collections of objects that existed before the queries (a pytest process holds some 270,000:
one full collection takes about 200 ms on this machine, whatever runs on the loop), frozen with
``gc.freeze()`` as docs/python.md advises an app to do after start-up.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from crops_pdfs import make_report_pdf
from fake_vllm_server import FakeVLLM, Reply, Request

from llama_index_docmemo import DocMemoConfig, DocMemoQueryEngine, QwenVL, default_encoder
from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.store import open_store

pytestmark = pytest.mark.slow

MODEL = "qwen-vl-test"
SHOWN = re.compile(r"\[(\d+)\] (\S+\.pdf), page (\d+)")
MAX_STALL = 0.100


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("nonblocking")
    write_demo_pdf(tmp / "docs" / "report.pdf")
    make_report_pdf(tmp / "docs" / "tables.pdf")
    encoder = default_encoder()
    store = open_store(path=tmp / "store", encoder=encoder)
    assert DocumentIndexer(store, encoder, ocr=False).index_paths([tmp / "docs"]).ok
    yield store, encoder
    store.close()


SERVER = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from fake_vllm_server import FakeVLLM
from test_async_nonblocking import reader
with FakeVLLM([], default=reader, model={MODEL!r}, max_images=8) as server:
    print(server.url, flush=True)
    sys.stdin.read()  # serve until the test closes stdin
"""


@contextmanager
def scripted_server() -> Iterator[str]:
    """The scripted server in a process of its own (its JSON and image decoding must not share
    this process's GIL with the event loop being measured); yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        url = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        process.stdin.close()  # type: ignore[union-attr]
        process.wait(timeout=30)


@pytest.fixture
def server_process() -> Iterator[str]:
    with scripted_server() as url:
        yield url


def reader(request: Request) -> Reply:
    """Every shown page useful on the second round, which answers."""
    shown = [int(n) for n, _, _ in SHOWN.findall(request.text)]
    last = "Reading round 2" in request.text
    return Reply(
        json.dumps(
            {
                "notes": [{"page": n, "fact": "a figure"} for n in shown[:1]],
                "useful_pages": shown[:2],
                "irrelevant_pages": shown[2:],
                "missing": [] if last else ["the rest"],
                "status": "answered" if last else "need_more",
                "answer": "1,184" if last else None,
                "refined_query": None if last else "employees by region table",
            }
        ),
        delay=0.05,
    )


SCHEDSTAT = Path("/proc/thread-self/schedstat")


def runqueue_seconds() -> float:
    """Seconds this thread has waited for a core so far (0 where Linux does not say). Only the
    loop's own thread: the waits of others (for a core, or for the GIL) cannot be told apart
    from a loop that blocks them."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


async def heartbeat(stop: asyncio.Event, gaps: list[tuple[float, float]]) -> None:
    """(stall, of which the loop's thread waited for a core) between ticks 10 ms apart."""
    last, waited = time.perf_counter(), runqueue_seconds()
    while not stop.is_set():
        await asyncio.sleep(0.010)
        now, wait = time.perf_counter(), runqueue_seconds()
        gaps.append((now - last - 0.010, wait - waited))
        last, waited = now, wait


def engine(indexed, url: str, cache: Path) -> DocMemoQueryEngine:
    store, encoder = indexed
    llm = QwenVL(model=MODEL, api_base=url, timeout=30, max_retries=1)
    config = DocMemoConfig(rounds=2, pages_per_round=3, candidates=20)
    return DocMemoQueryEngine.from_defaults(
        store=store, encoder=encoder, llm=llm, config=config, cache_dir=cache
    )


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The objects that exist now left out of full collections (see the module docstring)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def test_eight_concurrent_aqueries_never_stall_the_event_loop(
    indexed, server_process: str, tmp_path: Path, frozen_heap: None
) -> None:
    questions = [q.question for q in DEMO_QUESTIONS] * 3
    stop, gaps = asyncio.Event(), []
    beat = asyncio.create_task(heartbeat(stop, gaps))
    eng = engine(indexed, server_process, tmp_path / "cache")
    first = await eng.aquery(questions[0])  # no warm-up: the first query is measured too
    responses = await asyncio.gather(*(eng.aquery(q) for q in questions[:8]))
    stop.set()
    await beat
    assert all(str(r) == "1,184" for r in [first, *responses])
    images = [r["images"] for resp in responses for r in resp.metadata["docmemo"]["rounds"]]
    assert len(images) == 16 and all(n >= 3 for n in images)  # page images (and crops) each round
    stall, waited = max(gaps, key=lambda gap: gap[0] - gap[1])
    assert stall - waited < MAX_STALL, (
        f"event loop stalled {stall * 1000:.0f} ms, {waited * 1000:.0f} ms of it waiting for a "
        f"core (the longest wall-clock gap: {max(g[0] for g in gaps) * 1000:.0f} ms)"
    )


async def test_the_same_crops_from_eight_concurrent_queries_are_all_kept(indexed, tmp_path) -> None:
    cache = tmp_path / "cache"
    question = "What does the table of quarterly revenue show?"
    with FakeVLLM([], default=reader, model=MODEL) as server:
        eng = engine(indexed, server.url, cache)
        results = await asyncio.gather(*(eng.arun(question) for _ in range(8)))
    crops = [n for r in results for n in r.source_nodes if n.node.metadata.get("kind") != "page"]
    assert crops, "the report's tables gave no crop"
    for node in crops:
        assert Path(node.node.metadata["image_path"]).is_file()
    assert not list(cache.rglob("*.tmp*")) and not list(cache.rglob(".*-*.png"))
    per_query = {tuple(sorted(n.node.node_id for n in r.source_nodes)) for r in results}
    assert len(per_query) == 1  # the same evidence for the same question, none lost
