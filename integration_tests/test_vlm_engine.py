"""A whole DocMemo query with the VLM reader against the scripted OpenAI-compatible server.

A generated 40-page PDF is indexed into Qdrant Edge with the CPU encoder; the scripted "VLM" labels
the pages it is shown (gold pages useful, the rest irrelevant), asks for a refined query, and
answers on the last round. The trace must show the labels moving the beliefs, new pages read each
round, page images sent, and the episodic memory coming back in later prompts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pymupdf
import pytest
from fake_vllm_server import FakeVLLM, Reply, Request

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.llms import QwenVL
from llama_index_docmemo.postprocessors.rerank import LLMReranker
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import open_store

MODEL = "qwen-vl-test"
QUESTION = "What was the revenue growth in 2023?"
OVERVIEW, TABLE = 9, 27
GOLD = {OVERVIEW, TABLE}
SHOWN = re.compile(r"\[(\d+)\] report\.pdf, page (\d+)")


def write_report(path: Path) -> None:
    doc = pymupdf.open()
    topics = ["office plants", "parking rules", "holiday calendar", "cafeteria menu", "fire drills"]
    for number in range(1, 41):
        body = f"Page {number}. Notes on {topics[number % len(topics)]} and general administration."
        if number in (3, 15, 33):
            body = f"Page {number}. Revenue growth in 2023 was a topic at the staff meeting."
        if number == OVERVIEW:
            body = "Revenue growth 2023 overview: growth came from retail; see the segment margin table."
        if number == TABLE:
            body = "Segment margin table. Retail segment margin 12 percent, wholesale 4 percent."
        doc.new_page().insert_text((72, 72), body, fontsize=11)
    doc.save(path)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vlm_engine")
    write_report(tmp / "report.pdf")
    encoder = default_encoder()
    store = open_store(path=tmp / "store", encoder=encoder)
    report = DocumentIndexer(store, encoder, ocr=False).index_paths([tmp / "report.pdf"])
    assert report.ok and report.pages == 40
    yield store, encoder
    store.close()


def scripted_vlm(request: Request) -> Reply:
    """Label what was shown; refine towards the table; answer on the final round."""
    if "pages" in (request.schema or {}).get("properties", {}):  # the reranker
        candidates = {int(n): int(p) for n, p in SHOWN.findall(request.text)}
        best = sorted(candidates, key=lambda n: (candidates[n] not in GOLD, n))
        return Reply(json.dumps({"pages": best}))
    shown = {int(n): int(p) for n, p in SHOWN.findall(request.text)}
    final = "This is the last round" in request.text
    reply = {
        "notes": [
            {"page": n, "fact": f"page {p} is evidence"} for n, p in shown.items() if p in GOLD
        ],
        "useful_pages": [n for n, p in shown.items() if p in GOLD],
        "irrelevant_pages": [n for n, p in shown.items() if p not in GOLD],
        "missing": [] if final else ["retail segment margin figures"],
        "status": "answered" if final else "need_more",
        "answer": "Retail segment margin was 12 percent." if final else None,
        "refined_query": None if final else "retail segment margin table",
    }
    return Reply(json.dumps(reply))


def engine(store, encoder, server: FakeVLLM, **kw) -> DocMemoQueryEngine:
    llm = QwenVL(model=MODEL, api_base=server.url, timeout=10, max_retries=1)
    config = DocMemoConfig(rounds=3, pages_per_round=3, candidates=20, seed=0)
    return DocMemoQueryEngine.from_defaults(
        store=store, encoder=encoder, llm=llm, config=config, evidence_images=False, **kw
    )


def reading_requests(server: FakeVLLM) -> list[Request]:
    return [r for r in server.requests if "useful_pages" in (r.schema or {}).get("properties", {})]


def test_three_rounds_with_feedback_moving_the_beliefs(indexed) -> None:
    store, encoder = indexed
    with FakeVLLM([], default=scripted_vlm, model=MODEL) as server:
        result = engine(store, encoder, server).run(QUESTION)
    assert server.problems == []
    trace = result.trace
    assert len(trace.rounds) == 3 and trace.stop_reason == "answered"
    assert result.answer == "Retail segment margin was 12 percent." and trace.llm_calls == 3
    assert trace.reader == "llm" and trace.images  # QwenVL is multimodal: page images
    assert [r.llm_calls for r in trace.rounds] == [1, 1, 1]
    assert [r.images for r in trace.rounds] == [3, 3, 3]
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in trace.rounds)

    reads = [{s.page for s in r.selected} for r in trace.rounds]
    assert not reads[0] & reads[1] and not reads[1] & reads[2]  # no page read twice
    assert OVERVIEW in reads[0] and TABLE not in reads[0]
    assert TABLE in reads[1]  # found through the refined query the feedback asked for

    first = {(b.page): (b.alpha, b.beta) for b in trace.rounds[0].beliefs}
    for page in reads[0]:
        assert first[page] == ((2.0, 1.0) if page in GOLD else (1.0, 2.0))
    assert trace.rounds[1].query != QUESTION and "retail segment margin" in trace.rounds[1].query

    requests = reading_requests(server)
    assert len(requests) == 3
    for request in requests:
        assert len(request.image_sizes) == 3  # Qwen-VL: 28-px multiples within the 1500-px cap
        assert all(
            1472 <= max(s) <= 1500 and s[0] % 28 == s[1] % 28 == 0 for s in request.image_sizes
        )
    assert "Notes from earlier rounds" not in requests[0].text
    assert (
        "page 9 is evidence" in requests[1].text
        and "retail segment margin figures" in requests[1].text
    )
    assert "This is the last round" in requests[2].text
    assert {n.node.metadata["page"] for n in result.source_nodes} >= {OVERVIEW}


async def test_async_query_and_llm_reranker(indexed) -> None:
    store, encoder = indexed
    with FakeVLLM([], default=scripted_vlm, model=MODEL) as server:
        reranker = LLMReranker(llm=QwenVL(model=MODEL, api_base=server.url, timeout=10))
        result = await engine(store, encoder, server, reranker=reranker).arun(QUESTION)
    assert server.problems == []
    assert len(result.trace.rounds) == 3 and result.status == "answered"
    rerank_requests = len(server.requests) - len(reading_requests(server))
    assert rerank_requests == 3 and len(reading_requests(server)) == 3
    assert result.trace.llm_calls == 3 + 3  # the reranker's calls count in the query's budget
    read = {p.page for p in result.trace.pages_read}
    assert GOLD <= read
