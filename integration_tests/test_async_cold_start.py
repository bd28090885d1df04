"""The first ``aquery`` of a process costs about what the first sync ``query`` does.

Each mode runs in a fresh process on its own copy of one embedded store (the demo report and a
report with tables) and of one image cache (filled by an earlier process, so neither renders:
what differs is what a process builds on first use), reading page images and crops with
``QwenVL`` from a scripted server in a process of its own. What is timed is building the engine
and its first query, the same for both. Before, the async driver started worker processes on
first use and its first query spent seconds before sending anything.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from crops_pdfs import make_report_pdf
from test_async_nonblocking import scripted_server

from llama_index_docmemo import default_encoder
from llama_index_docmemo.demo.document import write_demo_pdf
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.store import open_store

pytestmark = pytest.mark.slow

FIRST_QUERY = """
import asyncio, json, sys, time
sys.path.insert(0, {tests!r})
from llama_index_docmemo import default_encoder
from llama_index_docmemo.demo.document import DEMO_QUESTIONS
from llama_index_docmemo.store import open_store
from test_async_nonblocking import engine

mode, store_path, cache, url = sys.argv[1:]
encoder = default_encoder()
store = open_store(path=store_path, encoder=encoder)
question = DEMO_QUESTIONS[0].question
started = time.perf_counter()
eng = engine((store, encoder), url, cache)
if mode == "sync":
    answer = eng.query(question)
else:
    answer = asyncio.run(eng.aquery(question))
print(json.dumps({{"seconds": time.perf_counter() - started, "answer": str(answer)}}))
store.close()
"""


def first_query(mode: str, tmp_path: Path, url: str, run: str) -> float:
    """Seconds to build an engine and answer its first query, in a fresh process."""
    store, cache = tmp_path / f"store-{run}", tmp_path / f"cache-{run}"
    shutil.copytree(tmp_path / "store", store)
    if (tmp_path / "cache").is_dir():
        shutil.copytree(tmp_path / "cache", cache)
    script = FIRST_QUERY.format(tests=str(Path(__file__).parent))
    done = subprocess.run(
        [sys.executable, "-c", script, mode, str(store), str(cache), url],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["answer"] == "1,184", done.stderr[-2000:]
    return result["seconds"]


def test_the_first_aquery_costs_about_what_the_first_query_does(tmp_path: Path) -> None:
    write_demo_pdf(tmp_path / "docs" / "report.pdf")
    make_report_pdf(tmp_path / "docs" / "tables.pdf")
    encoder = default_encoder()
    with open_store(path=tmp_path / "store", encoder=encoder) as store:
        assert DocumentIndexer(store, encoder, ocr=False).index_paths([tmp_path / "docs"]).ok
    with scripted_server() as url:
        first_query("sync", tmp_path, url, "cache")  # fills tmp_path / "cache"
        sync = first_query("sync", tmp_path, url, "sync")
        async_ = first_query("async", tmp_path, url, "async")
    # the bound is 3x + 1 s; worker processes started on first use took 3.6 s against
    # 0.9 s here, inside that bound, so the test holds a tighter one (measured: 1.0 s vs 0.9 s)
    assert async_ <= 1.5 * sync + 1.0, f"first aquery {async_:.2f} s, first query {sync:.2f} s"
