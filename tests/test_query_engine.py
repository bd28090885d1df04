"""The DocMemo loop end to end on both real stores: recovery, stops, isolation, events."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fakes_docmemo import BagOfWordsEncoder, GoldReader, one_llm_request
from llama_index.core.base.response.schema import Response
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.schema import QueryBundle
from stores_docmemo import StoreMaker, add_document

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.events import DocMemoRoundEndEvent, DocMemoRoundStartEvent
from llama_index_docmemo.loop.query import QueryIO, answer, rounds
from llama_index_docmemo.loop.state import start
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, Reader, ReaderInput
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRef

QUESTION = "what was revenue 2023 growth"
GOLD = {PageRef("report.pdf", 37), PageRef("report.pdf", 91)}
UNVERIFIED_42 = (
    "42 (Unverified: a figure of this answer is on no page read.)"  # the fake pages do not say 42
)


def report_pages() -> list[str]:
    pages = [f"filler page {i} about office plants and weather" for i in range(1, 101)]
    for p in (4, 8, 12, 16, 20):
        pages[p - 1] = "what was the outlook: revenue 2023 growth is discussed in later sections"
    pages[37 - 1] = "revenue 2023 growth was 12 percent"
    pages[91 - 1] = "segment margin table for the retail segment"
    return pages


def fill(store: PageStore) -> PageStore:
    add_document(store, "report.pdf", report_pages())
    add_document(store, "other.pdf", ["revenue 2023 growth in another company"] * 3, tenant="other")
    return store


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker, backend: str) -> Iterator[PageStore]:
    """The report and another tenant's document, shared by the tests that only query."""
    shared = fill(store_maker.open(backend))
    yield shared
    shared.close()


def engine_for(store, reader, **cfg) -> DocMemoQueryEngine:
    config = DocMemoConfig(**{"pages_per_round": 5, "candidates": 30, **cfg})
    return DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=reader,
        config=config,
        page_filter=PageFilter(doc_ids=("report.pdf",)),
        evidence_images=False,
    )


def test_loop_recovers_evidence_a_static_retrieval_misses(store) -> None:
    static = engine_for(store, GoldReader(GOLD, refine="segment margin"), static=True).run(QUESTION)
    read_static = {PageRef(p.doc_id, p.page) for p in static.trace.pages_read}
    assert not GOLD <= read_static and static.trace.stop_reason == "static"

    result = engine_for(store, GoldReader(GOLD, refine="segment margin")).run(QUESTION)
    read = {PageRef(p.doc_id, p.page) for p in result.trace.pages_read}
    assert GOLD <= read
    assert result.status == "answered" and result.answer == UNVERIFIED_42
    assert result.trace.stop_reason == "answered"
    assert len(result.trace.rounds) == 2
    assert result.trace.rounds[1].query == "segment margin"
    assert {n.node.metadata["page"] for n in result.source_nodes} == {37, 91}
    scores = [n.score for n in result.source_nodes]
    assert all(s is not None and s > 0.5 for s in scores)


def test_irrelevant_labels_lower_beliefs_and_pages_are_not_reread(store) -> None:
    result = engine_for(store, GoldReader(GOLD, refine=None), rounds=3).run(QUESTION)
    pages = [(p.doc_id, p.page) for p in result.trace.pages_read]
    assert len(pages) == len(set(pages))
    labelled = {"useful": 0, "irrelevant": 0}
    for rnd in result.trace.rounds:
        assert rnd.feedback is not None
        beliefs = {(b.doc_id, b.page): b for b in rnd.beliefs}
        for p in rnd.feedback.irrelevant:  # beta += 1; alpha moves only by propagation
            assert beliefs[(p.doc_id, p.page)].beta == 2.0
            labelled["irrelevant"] += 1
        for p in rnd.feedback.useful:
            assert (
                beliefs[(p.doc_id, p.page)].alpha >= 2.0 and beliefs[(p.doc_id, p.page)].beta == 1.0
            )
            labelled["useful"] += 1
    assert labelled["useful"] and labelled["irrelevant"]


def test_response_metadata_is_a_valid_trace(store) -> None:
    engine = engine_for(store, GoldReader(GOLD, refine="segment margin"))
    response = engine.query(QUESTION)
    assert isinstance(response, Response) and response.response == UNVERIFIED_42
    trace = QueryTrace.model_validate(response.metadata["docmemo"])
    assert trace.reader == "gold-test" and trace.llm_calls == 2
    assert [r.llm_calls for r in trace.rounds] == [1, 1] and not trace.images


def test_filters_scope_every_round(store) -> None:
    result = engine_for(store, GoldReader(GOLD, refine="revenue growth")).run(QUESTION)
    assert all(p.doc_id == "report.pdf" for p in result.trace.pages_read)
    for rnd in result.trace.rounds:
        assert all(c.doc_id == "report.pdf" for c in rnd.candidates)


def test_concurrent_queries_never_share_state(store) -> None:
    engine = engine_for(store, GoldReader(GOLD, refine="segment margin"))
    engine_b = engine_for(store, GoldReader({PageRef("report.pdf", 4)}))

    async def both():
        return await asyncio.gather(
            engine.arun(QUESTION), engine_b.arun(QUESTION), engine.arun(QUESTION)
        )

    a1, b, a2 = asyncio.run(both())
    sequential = engine_for(store, GoldReader(GOLD, refine="segment margin")).run(QUESTION)
    assert [p.model_dump() for p in a1.trace.pages_read] == [
        p.model_dump() for p in sequential.trace.pages_read
    ]
    assert a1.trace.rounds[0].beliefs == sequential.trace.rounds[0].beliefs
    assert b.trace.stop_reason == "answered" and len(b.trace.rounds) == 1
    assert len(a2.trace.rounds) == 2


class Unsure(Reader):
    name = "unsure"

    def __init__(self, status: str) -> None:
        self.status = status

    def read(self, inp: ReaderInput) -> Feedback:
        one_llm_request()
        return Feedback(status=self.status, irrelevant_pages=[p.ref for p in inp.pages])


def test_unanswerable_is_not_accepted_after_one_round(store) -> None:
    result = engine_for(store, Unsure("unanswerable")).run(QUESTION)
    assert result.trace.stop_reason == "unanswerable"
    assert len(result.trace.rounds) == 2
    assert result.status == "unanswerable"
    assert result.source_nodes == [] and result.trace.evidence == []  # read is not evidence


def test_deadline_stops_between_steps(store, monkeypatch) -> None:
    import llama_index_docmemo.loop.query as clock_module

    now = [0.0]
    monkeypatch.setattr(clock_module, "_clock", lambda: now[0])

    class Slow(Unsure):
        def read(self, inp: ReaderInput) -> Feedback:
            now[0] += 6.0  # each reading takes 6 s on the fake clock
            return super().read(inp)

    result = engine_for(store, Slow("need_more"), max_seconds=10, rounds=5).run(QUESTION)
    assert result.trace.stop_reason == "deadline"
    assert len(result.trace.rounds) == 2 and result.trace.llm_calls == 2
    unbounded = engine_for(store, Slow("need_more"), rounds=5).run(QUESTION)
    assert unbounded.trace.stop_reason != "deadline" and len(unbounded.trace.rounds) > 2


def test_llm_requests_share_the_query_deadline(store, monkeypatch) -> None:
    """The reader's LLM requests are capped at the time the query has left; a request cut short
    by it ends the query as "deadline" with what was found, any other LLM failure propagates."""
    import time

    import llama_index_docmemo.loop.query as clock_module
    from llama_index_docmemo.errors import LLMError
    from llama_index_docmemo.llms.wire import deadline_at

    now = [0.0]
    monkeypatch.setattr(clock_module, "_clock", lambda: now[0])
    caps: list[float] = []

    class CutShort(Unsure):
        def read(self, inp: ReaderInput) -> Feedback:
            at = deadline_at(None)
            assert at is not None
            caps.append(at - time.monotonic())
            now[0] += 6.0
            if now[0] >= 10.0:  # the server was still talking when the query's time ran out
                raise LLMError("LLM endpoint http://127.0.0.1:1 did not answer within the deadline")
            return super().read(inp)

    result = engine_for(store, CutShort("need_more"), max_seconds=10, rounds=5).run(QUESTION)
    assert result.trace.stop_reason == "deadline" and len(result.trace.rounds) == 2
    assert 9.0 < caps[0] <= 10.0 and 3.0 < caps[1] <= 4.0

    class Down(Unsure):
        def read(self, inp: ReaderInput) -> Feedback:
            raise LLMError("LLM endpoint http://127.0.0.1:1 refused the connection")

    with pytest.raises(LLMError, match="refused"):
        engine_for(store, Down("need_more"), max_seconds=10).run(QUESTION)


def test_question_bounds(store) -> None:
    from llama_index_docmemo.errors import QuestionError

    engine = engine_for(store, Unsure("need_more"), max_question_chars=50)
    for empty in ("", "   \n\t"):
        with pytest.raises(QuestionError, match="empty"):
            engine.run(empty)
    with pytest.raises(QuestionError, match="max_question_chars=50"):
        engine.run("revenue " * 20)
    with pytest.raises(QuestionError):
        engine.query("  ")
    cut = engine_for(
        store, Unsure("need_more"), max_question_chars=50, question_overflow="truncate"
    ).run("revenue 2023 growth " * 20)
    assert len(cut.trace.question) <= 50 and cut.trace.question.startswith("revenue 2023")
    assert all(len(r.query) <= 50 for r in cut.trace.rounds)


def test_per_query_state_holds_only_what_the_query_touched(open_store) -> None:
    store = fill(open_store())
    for i in range(30):
        add_document(
            store, f"noise{i}.pdf", [f"unrelated page {p} about gardening" for p in range(3)]
        )
    # a store returns pages matching nothing too: searches 10 deep reach a few documents
    engine = engine_for(
        store,
        GoldReader(GOLD, refine="segment margin"),
        candidates=10,
        document_search_pages=10,
    )
    engine.retriever.page_filter = PageFilter()
    asked: list[PageFilter | None] = []
    list_documents, list_cards = store.list_documents, store.list_cards
    store.list_documents = lambda scope=None: asked.append(scope) or list_documents(scope)
    store.list_cards = lambda scope=None: asked.append(scope) or list_cards(scope)
    io = QueryIO.of(engine.runner)
    first = start(QUESTION, engine.retriever.page_filter, engine.config)
    loop = run(rounds(engine.runner, first, io))
    result = run(answer(engine.runner, loop, io))
    # schemas (alone or with cards) only of documents among the search's hits, each fetched
    # once, never the scope's
    candidate_docs = {c.doc_id for r in result.trace.rounds for c in r.candidates}
    requested = [d for scope in asked for d in scope.doc_ids]
    assert sorted(requested) == sorted(set(requested)) == sorted(loop.schema.schemas)
    assert candidate_docs <= set(requested) and len(requested) < 31  # of 31 in scope
    touched = set(loop.retrieval) | loop.read
    assert len(loop.beliefs) <= len(touched) + 4 * len(loop.episodic.useful_pages)
    assert loop.pages_known == sum(store.get_schema(d).n_pages for d in loop.schema.schemas)
    assert loop.scope_pages is None  # counted only for an early "unanswerable"


def test_unanswerable_is_accepted_once_the_whole_scope_was_read(store) -> None:
    small = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=Unsure("unanswerable"),
        config=DocMemoConfig(pages_per_round=5),
        page_filter=PageFilter(doc_ids=("other.pdf",), tenant="other"),
        evidence_images=False,
    )
    for result in (small.run(QUESTION), asyncio.run(small.arun(QUESTION))):
        assert result.trace.stop_reason == "unanswerable" and len(result.trace.rounds) == 1
        assert len(result.trace.pages_read) == 3


def test_budgets_stop_the_loop(store) -> None:
    by_calls = engine_for(store, Unsure("need_more"), max_llm_calls=1).run(QUESTION)
    assert by_calls.trace.stop_reason == "budget" and by_calls.trace.llm_calls == 1
    by_pages = engine_for(store, Unsure("need_more"), max_pages=3).run(QUESTION)
    assert len(by_pages.trace.pages_read) == 3 and by_pages.trace.stop_reason == "budget"
    out_of_rounds = engine_for(store, Unsure("need_more"), pages_per_round=2).run(QUESTION)
    assert out_of_rounds.trace.stop_reason == "max_rounds"
    assert out_of_rounds.status == "need_more"


def test_no_candidates_stops_cleanly(store) -> None:
    engine = engine_for(store, Unsure("need_more"))
    engine.retriever.page_filter = PageFilter(doc_ids=("missing.pdf",))
    result = engine.run(QUESTION)
    assert result.trace.stop_reason == "no_candidates"
    assert result.trace.pages_read == []


def test_round_events_are_dispatched(store) -> None:
    seen: list[object] = []

    class Collect(BaseEventHandler):
        def handle(self, event, **kwargs) -> None:
            if isinstance(event, DocMemoRoundStartEvent | DocMemoRoundEndEvent):
                seen.append(event)

    handler = Collect()
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        engine_for(store, GoldReader(GOLD, refine="segment margin")).query(QUESTION)
    finally:
        root.event_handlers.remove(handler)
    assert [type(e).__name__ for e in seen] == [
        "DocMemoRoundStartEvent",
        "DocMemoRoundEndEvent",
    ] * 2


def test_retrieve_and_synthesize_slot_under_routers(store) -> None:
    engine = engine_for(store, GoldReader(GOLD, refine="segment margin"))
    nodes = engine.retrieve(QueryBundle(QUESTION))
    assert {n.node.metadata["page"] for n in nodes} == {37, 91}
    response = engine.synthesize(QueryBundle(QUESTION), nodes)
    assert response.response == "42"


def test_retriever_alone_returns_round_one_pages(store) -> None:
    engine = engine_for(store, GoldReader(GOLD))
    nodes = engine.retriever.retrieve(QUESTION)
    assert [n.node.metadata["page"] for n in nodes] == [4, 8, 12, 16, 20]


def test_streaming_streams_the_final_answer_from_the_llm(store) -> None:
    from llama_index.core.base.response.schema import StreamingResponse
    from llama_index.core.llms import MockLLM

    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        llm=MockLLM(max_tokens=8),
        reader=GoldReader(GOLD, refine="segment margin"),
        config=DocMemoConfig(adaptive_granularity=False),
        page_filter=PageFilter(doc_ids=("report.pdf",)),
        streaming=True,
        evidence_images=False,
    )
    response = engine.query(QUESTION)
    assert isinstance(response, StreamingResponse)
    tokens = list(response.response_gen)
    assert len(tokens) == 8 and all(isinstance(t, str) for t in tokens)
    assert {n.node.metadata["page"] for n in response.source_nodes} == {37, 91}
    # the streamed answer is the trace's answer, and its call is counted
    assert response.metadata["docmemo"]["answer"] == "".join(tokens) != "42"
    assert response.metadata["docmemo"]["llm_calls"] == 2 + 1


def test_streamed_answer_fits_the_call_budget(store) -> None:
    from llama_index.core.llms import MockLLM

    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        llm=MockLLM(max_tokens=4),
        reader=Unsure("need_more"),
        config=DocMemoConfig(adaptive_granularity=False, max_llm_calls=2),
        page_filter=PageFilter(doc_ids=("report.pdf",)),
        streaming=True,
        evidence_images=False,
    )
    response = engine.query(QUESTION)
    text = "".join(response.response_gen)
    trace = response.metadata["docmemo"]
    assert len(trace["rounds"]) == 1  # one call kept for the answer
    assert trace["llm_calls"] == 2 and trace["answer"] == text


async def test_astream_awaits_the_loop_and_streams(store) -> None:
    from llama_index.core.base.response.schema import AsyncStreamingResponse
    from llama_index.core.llms import MockLLM

    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        llm=MockLLM(max_tokens=5),
        reader=GoldReader(GOLD, refine="segment margin"),
        config=DocMemoConfig(adaptive_granularity=False),
        page_filter=PageFilter(doc_ids=("report.pdf",)),
        streaming=True,
        evidence_images=False,
    )
    response = await engine.astream(QUESTION)
    assert isinstance(response, AsyncStreamingResponse)
    tokens = [t async for t in response.async_response_gen()]
    assert len(tokens) == 5
    assert response.metadata["docmemo"]["answer"] == "".join(tokens)


def test_streaming_without_an_llm_streams_the_loops_answer_in_one_chunk(store) -> None:
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=GoldReader(GOLD),
        streaming=True,
        evidence_images=False,
    )
    response = engine.query(QUESTION)
    chunks = list(response.response_gen)
    assert len(chunks) == 1 and chunks[0] == response.metadata["docmemo"]["answer"]


def test_the_engine_owns_one_runner_and_its_retriever_is_round_one_over_it(store) -> None:
    """``from_defaults`` builds one runner: the engine's adds the reader to the retriever's,
    every other part (store, encoder, config, levers and their caches, reranker) is the same
    object, and ``retrieve`` returns what the engine's own round 1 selects."""
    engine = engine_for(store, GoldReader(GOLD))
    view, runner = engine.retriever.runner, engine.runner
    assert runner.reader is engine.reader and view.reader is None
    for part in ("store", "encoder", "config", "levers", "reranker", "cpu"):
        assert getattr(runner, part) is getattr(view, part), part
    nodes = engine.retriever.retrieve(QUESTION)
    first = engine.run(QUESTION).trace.rounds[0]
    assert [(n.node.metadata["doc_id"], n.node.metadata["page"]) for n in nodes] == [
        (s.doc_id, s.page) for s in first.selected
    ]
