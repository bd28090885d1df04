"""Every ``DocMemoConfig`` knob changes what a query does: one row per knob, two engine runs.

Each row runs the same small query twice on a real store (Edge), once with a base config and
once with the knob changed, and compares what can be observed from outside (the trace without
timings, what the reader was shown, what the store was asked). A knob the code stops reading
gives two equal runs and its row fails; a knob added to the config without a row fails the
coverage test.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes_docmemo import BagOfWordsEncoder, GoldReader, ScriptedChatLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from stores_docmemo import StoreCalls, StoreMaker, add_document, word_embeddings

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import QuestionError
from llama_index_docmemo.ingest.ocr import find_tessdata
from llama_index_docmemo.llms.images import sizing_for
from llama_index_docmemo.memory.schema import DocumentSchema, Section
from llama_index_docmemo.postprocessors.rerank import LLMReranker
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, ReaderInput
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRecord, PageRef
from tests.ingest_samples import text_image_png

DOC = "report.pdf"
QUESTION = "what was the revenue growth in 2023 and what does page 20 say"
# p11 opens a section (cross-section propagation), cites Note 5 (defined on p25, a label
# reference); p12 ends in table rows that p13 continues (a continuation); p28 is an income
# statement heading (the statement lever); p20 is named by the question.
TEXTS = {
    1: "annual report cover and contents",
    2: "revenue outlook is discussed in later sections",
    4: "revenue outlook is discussed in later sections",
    6: "revenue outlook for 2023 is discussed later",
    11: "revenue growth was 12 percent in 2023, see Note 5",
    12: "revenue table 2023 2022\n1,200 1,100\n300 250\n400 390",
    13: "45 40 30\n20 10 5\n7 8 9\nmore results for 2023 growth",
    20: "page twenty holds the auditor's letter",
    25: "Note 5 Revenue recognition\nrevenue is recognised when goods ship",
    28: "consolidated statements of operations income statement net sales revenue",
}
N_PAGES = 30
GOLD = {PageRef(DOC, 11), PageRef(DOC, 12), PageRef(DOC, 999)}  # p999: never done, all rounds run


@functools.cache
def _scanned_report() -> str:
    """A 30-page PDF whose page 11 is only an image of its figure (what an OCR'd page is)."""
    import pymupdf

    pdf = pymupdf.open()
    for number in range(1, N_PAGES + 1):
        page = pdf.new_page(width=720, height=540)
        if number == 11:
            page.insert_image(page.rect, stream=text_image_png("growth was 12 percent"))
    path = Path(tempfile.mkdtemp(prefix="docmemo-knobs-")) / DOC
    pdf.save(path)
    return str(path)


def _fill(store: PageStore, scenario: str) -> PageStore:
    sections = [
        Section(title="Overview", start_page=1, end_page=10),
        Section(title="Results", start_page=11, end_page=20),
        Section(title="Notes", start_page=21, end_page=30),
    ]
    schema = DocumentSchema(
        doc_id=DOC,
        doc_version="v1",
        n_pages=N_PAGES,
        title="Annual report",
        sections=sections,
        page_sections={p: s.title for s in sections for p in range(s.start_page, s.end_page + 1)},
        page_summaries={p: f"summary of page {p}" for p in range(1, N_PAGES + 1)},
    )
    source = _scanned_report() if scenario == "ocr" else ""  # p11 read by OCR
    records = [
        PageRecord(
            DOC,
            "v1",
            p,
            N_PAGES,
            TEXTS.get(p, f"filler page {p} about weather"),
            source=source,
            ocr=bool(source) and p == 11,
        )
        for p in range(1, N_PAGES + 1)
    ]
    store.upsert_document(schema, records, word_embeddings(records))
    if scenario != "ocr":  # a second document: the "corpus" scope is the whole store
        add_document(
            store,
            "other.pdf",
            ["other company annual review 2023"]
            + [f"revenue growth outlook page {p}" for p in range(2, 13)],
        )
    return store


class TableCrops(BaseNodePostprocessor):
    """One table crop per page read (the loop's crop stage, without a PDF)."""

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        crops = [
            NodeWithScore(
                node=TextNode(
                    text=f"table crop of page {n.node.metadata['page']}",
                    metadata={**n.node.metadata, "kind": "table", "bbox": [0.0, 0.0, 1.0, 1.0]},
                ),
                score=n.score,
            )
            for n in nodes
        ]
        return list(nodes) + crops


class Unanswerable(GoldReader):
    """Says "not in the documents" every round."""

    def read(self, inp: ReaderInput) -> Feedback:
        feedback = super().read(inp)
        return feedback.model_copy(update={"status": "unanswerable", "answer": None})


class Guesser(GoldReader):
    """Says "answered" every round without labelling any page useful."""

    def read(self, inp: ReaderInput) -> Feedback:
        feedback = super().read(inp)
        return feedback.model_copy(
            update={"status": "answered", "answer": "a guess", "useful_pages": []}
        )


class Citer(GoldReader):
    """Answers with the figure of p11 once it is shown (a citation the pages verify)."""

    def read(self, inp: ReaderInput) -> Feedback:
        feedback = super().read(inp)
        p11 = PageRef(DOC, 11)
        if p11 not in [p.ref for p in inp.pages]:
            return feedback
        return feedback.model_copy(
            update={"status": "answered", "answer": "growth was 12 percent", "useful_pages": [p11]}
        )


READERS = {"unanswerable": Unanswerable, "guess": Guesser, "cited": Citer, "ocr": Citer}


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _shown(inputs: Sequence[ReaderInput]) -> list[tuple[Any, ...]]:
    return [
        (
            i.round,
            i.query,
            i.question,
            i.final_round,
            i.outline,
            [(str(p.ref), p.section, p.summary) for p in i.pages],
            [str(c.page) for c in i.crops],
            [n.fact for n in i.evidence],
            list(i.missing),
        )
        for i in inputs
    ]


@pytest.fixture(scope="module")
def stores(store_maker: StoreMaker) -> Iterator[Callable[[str], PageStore]]:
    """The report with the OCR'd PDF, or with a second document (in scope in the "corpus"
    scenario only), made once a module: a query only reads it."""
    made: dict[str, PageStore] = {}

    def store(scenario: str) -> PageStore:
        kind = "ocr" if scenario == "ocr" else ""  # the others scope the report alone
        if kind not in made:
            made[kind] = _fill(store_maker.open("edge"), kind)
        return made[kind]

    yield store
    for opened in made.values():
        opened.close()


def observe(
    settings: dict[str, Any], scenario: str, stores: Callable[[str], PageStore]
) -> dict[str, Any]:
    """What one query does under ``settings`` in ``scenario``, as seen from outside."""
    if scenario == "ocr" and find_tessdata() is None:
        pytest.skip("Tesseract language data is not installed (the OCR word boxes need it)")
    store = stores(scenario)
    reader = READERS.get(scenario, GoldReader)(GOLD, refine="revenue recognition")
    config = DocMemoConfig(**{"rounds": 3, "pages_per_round": 3, **settings})
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=reader,
        llm=ScriptedChatLLM() if scenario == "llm" else None,
        config=config,
        page_filter=PageFilter() if scenario == "corpus" else PageFilter(doc_ids=(DOC,)),
        crop_postprocessor=TableCrops() if scenario == "crops" else None,
        evidence_images=False,
    )
    with pytest.MonkeyPatch.context() as patch:
        calls = StoreCalls(patch, store, "search")
        try:
            result = engine.run(QUESTION)
        except QuestionError as error:
            return {"refused": str(error)}
    reranker = engine.retriever.reranker
    return {
        "trace": _without_timings(result.trace.model_dump(mode="json")),
        "shown": _shown(reader.inputs),
        "searches": [(k["limit"], k["prefetch_limit"]) for k, _ in calls.calls["search"]],
        # the doubles' pages carry no images: the sizing and the byte budget the reranker
        # would encode them with
        "image_sizing": (
            (repr(sizing_for(reranker.llm, reranker.max_image_tokens)), reranker.max_image_bytes)
            if isinstance(reranker, LLMReranker)
            else None
        ),
    }


# (knob, changed value, base settings, scenario)
ROWS: list[tuple[str, Any, dict[str, Any], str]] = [
    ("rounds", 1, {}, ""),
    ("pages_per_round", 2, {}, ""),
    ("pages_schedule", (2, 1), {}, ""),
    ("answer_needs_evidence", True, {}, "guess"),
    ("give_up_after_pages", 3, {"answer_needs_evidence": True}, "guess"),
    ("static", True, {}, ""),
    ("use_schema", False, {}, ""),
    ("use_belief", False, {}, ""),
    ("use_episodic", False, {}, ""),
    ("bayesian_update", False, {}, ""),
    ("adaptive_granularity", False, {}, "crops"),
    ("max_table_crops", 1, {}, "crops"),
    ("reread_useful", True, {}, ""),
    ("min_rounds_before_unanswerable", 1, {}, "unanswerable"),
    ("max_label_changes_per_round", 1, {}, ""),
    ("candidates", 4, {}, ""),
    ("prefetch", 50, {}, ""),
    ("lambda_schedule", (0.0,), {}, ""),
    ("sampling", "thompson", {}, ""),
    ("seed", 7, {"sampling": "thompson"}, ""),
    ("propagation", False, {}, ""),
    ("propagation_radius", 1, {}, ""),
    ("propagation_gamma", 0.9, {}, ""),
    ("propagation_weight", 1.0, {}, ""),
    ("cross_section_weight", 1.0, {}, ""),
    ("relevance_feedback", 5, {}, ""),
    ("llm_rerank", True, {}, "llm"),
    ("question_reference_weight", 0.0, {}, ""),
    ("reference_weight", 0.0, {"continuation_weight": 2.0}, ""),
    ("continuation_weight", 0.0, {}, ""),
    ("statement_weight", 0.0, {}, ""),
    ("statement_first_round", 1, {}, ""),
    ("fusion_rule", "sum", {}, ""),
    ("document_beliefs", False, {}, "corpus"),
    ("document_search_pages", 5, {}, "corpus"),
    ("card_weight", 0.0, {}, "corpus"),
    ("card_lead", 0.9, {}, "corpus"),
    ("document_prior_strength", 1.0, {}, "corpus"),
    ("document_irrelevant_weight", 0.5, {}, "corpus"),
    ("document_miss_weight", 0.0, {}, "corpus"),
    ("documents_per_round", 1, {"document_share": 0.0}, "corpus"),
    ("document_share", 0.0, {}, "corpus"),
    ("max_llm_calls", 1, {}, ""),
    ("max_pages", 2, {}, ""),
    ("max_seconds", 1e-9, {}, ""),
    ("max_question_chars", 20, {"question_overflow": "truncate"}, ""),
    ("question_overflow", "truncate", {"max_question_chars": 20}, ""),
    ("citation_markers", True, {}, "cited"),
    ("abstain", "unverified", {}, "guess"),
    ("abstain_min_belief", 0.99, {"abstain": "low_belief"}, "cited"),
    ("ocr_boxes", True, {}, "ocr"),
    ("max_image_tokens", 256, {"llm_rerank": True}, "llm"),
    ("max_image_bytes", None, {"llm_rerank": True}, "llm"),
]

_BASES: dict[tuple[str, str], dict[str, Any]] = {}


def _base(
    settings: dict[str, Any], scenario: str, stores: Callable[[str], PageStore]
) -> dict[str, Any]:
    key = (repr(sorted(settings.items())), scenario)
    if key not in _BASES:
        _BASES[key] = observe(settings, scenario, stores)
    return _BASES[key]


def test_every_knob_has_a_row() -> None:
    assert sorted(name for name, *_ in ROWS) == sorted(DocMemoConfig.setting_names())


@pytest.mark.parametrize(("knob", "value", "base", "scenario"), ROWS, ids=[r[0] for r in ROWS])
def test_the_knob_changes_what_a_query_does(
    knob: str, value: Any, base: dict[str, Any], scenario: str, stores
) -> None:
    group = DocMemoConfig.setting_names()[knob]
    before = getattr(getattr(DocMemoConfig(**base), group), knob)
    assert before != value, f"{knob}: the row must change the value ({before!r})"
    changed = observe({**base, knob: value}, scenario, stores)
    assert changed != _base(base, scenario, stores), f"{knob}={value!r} changed nothing observable"
