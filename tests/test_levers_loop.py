"""The levers inside the loop, over in-memory doubles: each changes later rounds only, as switched."""

from __future__ import annotations

import numpy as np
import pytest
from fakes_docmemo import WORD, BagOfWordsEncoder, GoldReasoner, MemoryPageStore

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.levers.variants import LEVERS_OFF
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.types import PageFilter, PageHit, PageRef

DOC = "report.pdf"


class FeedbackStore(MemoryPageStore):
    """Adds a recommend double: pages sharing words with the positive examples, minus negatives."""

    def __init__(self) -> None:
        super().__init__()
        self.feedback_calls: list[dict[str, object]] = []

    def feedback_search(self, positive, negative=(), *, limit, page_filter=None, **options):
        self.feedback_calls.append({"positive": list(positive), "filter": page_filter, **options})
        examples = self.get_pages(list(positive), page_filter)
        words = set().union(*(set(WORD.findall(r.text.lower())) for r in examples)) - {"page"}
        hits = []
        for record in self.pages.values():
            if record.ref in positive or record.ref in negative:
                continue
            if not self._visible(record, page_filter):
                continue
            score = len(words & set(WORD.findall(record.text.lower())))
            if score:
                hits.append(PageHit(record, float(score)))
        hits.sort(key=lambda h: (-h.score, h.record.doc_id, h.record.page))
        return hits[:limit]


def pages() -> list[str]:
    texts = [f"page {i} about office plants and weather" for i in range(1, 61)]
    texts[2] = "revenue by region: see Table 7 for the breakdown"
    texts[40] = "Table 7: zebra quokka breakdown by region"
    texts[20] = "zebra quokka numbers continue here"
    texts[10] = "headcount in 2019 was 120 employees"
    texts[50] = "headcount in 2021 was 150"
    texts[30] = "headcount in 2019 by site"
    texts[31] = "headcount in 2019 by function"
    return texts


@pytest.fixture()
def store() -> FeedbackStore:
    s = FeedbackStore()
    s.add(DOC, pages())
    return s


def run(store, gold, question, **cfg):
    settings = {**LEVERS_OFF, "pages_per_round": 3, "candidates": 5, "rounds": 3, **cfg}
    config = DocMemoConfig(**settings)
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reasoner=GoldReasoner(set(gold)),
        config=config,
        page_filter=PageFilter(doc_ids=(DOC,)),
        evidence_images=False,
    )
    trace = engine.run(question).trace
    return [[PageRef(p.doc, p.page) for p in trace.pages_read if p.round == r] for r in (1, 2, 3)]


def test_reference_propagation_reads_the_cited_table() -> None:
    store = FeedbackStore()
    store.add(DOC, pages())
    gold = {PageRef(DOC, 3), PageRef(DOC, 41)}
    question = "what revenue"
    off = run(store, gold, question)
    on = run(store, gold, question, reference_weight=2.0)
    assert off[0] == on[0] and PageRef(DOC, 3) in on[0]
    assert PageRef(DOC, 41) in on[1]
    assert PageRef(DOC, 41) not in off[0] + off[1]


def test_feedback_search_adds_pages_like_the_useful_ones(store) -> None:
    gold = {PageRef(DOC, 41), PageRef(DOC, 21)}
    question = "Table 7 breakdown"
    off = run(store, gold, question)
    on = run(store, gold, question, feedback_search="recommend", feedback_weight=1.0)
    assert off[0] == on[0] and PageRef(DOC, 41) in on[0]
    assert PageRef(DOC, 21) in on[1] and PageRef(DOC, 21) not in off[0] + off[1]
    call = store.feedback_calls[-1]
    assert call["positive"] == [PageRef(DOC, 41)]
    assert call["filter"] == PageFilter(doc_ids=(DOC,))


def test_subqueries_search_each_year(store) -> None:
    gold = {PageRef(DOC, 11), PageRef(DOC, 51)}
    question = "headcount in 2019 and 2021"
    on = run(
        store, gold, question, subqueries=True, pages_per_round=1, candidates=2, propagation=False
    )
    off = run(store, gold, question, pages_per_round=1, candidates=2, propagation=False)
    assert on[0] == off[0]
    assert gold <= set(on[0] + on[1] + on[2])
    assert not gold <= set(off[0] + off[1] + off[2])


def test_pages_schedule_shapes_the_budget(store) -> None:
    reads = run(store, {PageRef(DOC, 60)}, "office plants", pages_schedule=[1, 2, 4], candidates=30)
    assert [len(r) for r in reads] == [1, 2, 4]
    static = run(
        store, {PageRef(DOC, 60)}, "office plants", pages_schedule=[1], static=True, candidates=30
    )
    assert [len(r) for r in static] == [3, 0, 0]


def test_schema_field_ranks_pages_by_section_titles() -> None:
    store = FeedbackStore()
    store.add(DOC, pages())
    schema = store.schemas[DOC]
    store.schemas[DOC] = DocumentSchema(
        **{**schema.model_dump(), "page_sections": {33: "Liquidity and capital resources"}}
    )
    gold = {PageRef(DOC, 3), PageRef(DOC, 33)}
    question = "revenue by region and liquidity"
    on = run(store, gold, question, schema_field_weight=1.0)
    off = run(store, gold, question)
    assert on[0] == off[0]
    assert PageRef(DOC, 33) in on[1] and PageRef(DOC, 33) not in off[1] + off[2]


def test_calibrated_prior_replaces_the_raw_score() -> None:
    store = FeedbackStore()
    store.add(DOC, pages())
    config = DocMemoConfig(
        **{**LEVERS_OFF, "prior_strength": 10.0, "prior_calibration": [-2.0, 0.0, 0.0]}
    )
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reasoner=GoldReasoner(set()),
        config=config,
        page_filter=PageFilter(doc_ids=(DOC,)),
        evidence_images=False,
    )
    trace = engine.run("office plants").trace  # answers after round 1 (no gold pages)
    beliefs = {(b.doc, b.page): (b.alpha, b.beta) for b in trace.rounds[0].beliefs}
    p = 1 / (1 + np.exp(2.0))
    # page 10 is a candidate that round 1 did not read: its belief is the calibrated prior
    assert beliefs[(DOC, 10)] == pytest.approx((1 + 10 * p, 1 + 10 * (1 - p)))


def test_levers_off_leave_the_loop_unchanged(store) -> None:
    gold = {PageRef(DOC, 3), PageRef(DOC, 41)}
    plain = run(store, gold, "revenue by region breakdown")
    explicit = run(
        store,
        gold,
        "revenue by region breakdown",
        feedback_search="off",
        reference_weight=0.0,
        subqueries=False,
        schema_field_weight=0.0,
    )
    assert plain == explicit and store.feedback_calls == []


def test_pages_the_question_names_are_read_from_round_two() -> None:
    store = FeedbackStore()
    texts = pages()
    texts[13] = "Figure 9: a chart of zebra counts"
    store.add(DOC, texts)
    question = "In Figure 9 and on the last page, how many office plants?"
    unseen = {PageRef(DOC, 59)}  # never found: the loop runs every round
    off = run(store, unseen, question)
    on = run(store, unseen, question, question_reference_weight=3.0)
    assert on[0] == off[0]
    assert {PageRef(DOC, 14), PageRef(DOC, 60)} <= set(on[1])
    assert not {PageRef(DOC, 14), PageRef(DOC, 60)} & set(off[0] + off[1] + off[2])
