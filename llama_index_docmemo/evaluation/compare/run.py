"""``docmemo compare`` as a Python function: index, answer with every engine, check, judge, report.

Resumable: each finished (question, engine) is a line of ``OUT/results.jsonl`` and each verdict one
of ``OUT/judgements.jsonl``, so rerunning the same command continues where it stopped (a run with
other documents, LLM or page budget into the same folder is refused). An answer's cost is counted
from LlamaIndex's instrumentation (:func:`~llama_index_docmemo.events.counting_llm_calls`: every
chat / completion request made while the engine answers, its images and its reported usage),
so it is measured the same way for DocMemo and for the stock engines.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from math import ceil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.compare.citing import answer_citations
from llama_index_docmemo.evaluation.compare.engines import (
    COMPARE_ENGINES,
    DEFAULT_ENGINES,
    DOCMEMO,
    CompareEngine,
    EngineReply,
    docmemo_engine,
    page_budget_tokens,
    stock_engine,
)
from llama_index_docmemo.evaluation.compare.questions import Question, load_questions
from llama_index_docmemo.evaluation.compare.records import (
    RESULTS,
    TRACES,
    VERDICTS,
    AnswerRecord,
    PageCitation,
    append_jsonl,
    load_records,
    rewrite_records,
)
from llama_index_docmemo.evaluation.compare.verdicts import judge_records
from llama_index_docmemo.evaluation.configs import EngineConfigs
from llama_index_docmemo.evaluation.judge import AnswerJudge, VerdictCache, model_name
from llama_index_docmemo.evaluation.runner import check_settings
from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.evidence.citations import Citation, PageText
from llama_index_docmemo.loop.result import OCR_BOX_PAGES
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageRef

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.store.base import PageStore

ROUNDS = 3


def check_engines(engines: Sequence[str]) -> list[str]:
    """The engines asked, in order, without repeats; unknown names raise ValueError."""
    names = list(dict.fromkeys(e.strip() for e in engines if e.strip()))
    unknown = [n for n in names if n not in COMPARE_ENGINES]
    if unknown or not names:
        raise ValueError(
            f"unknown engine(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(COMPARE_ENGINES)}"
        )
    return names


def docmemo_configs(pages: int) -> EngineConfigs:
    """DocMemo's settings for a page budget: three rounds of ceil(pages / 3), capped at ``pages``."""
    if pages < 1:
        raise ValueError(f"--pages must be at least 1, got {pages}")
    per_round = ceil(pages / ROUNDS)
    overrides = {} if per_round * ROUNDS == pages else {"max_pages": pages}
    return EngineConfigs(pages_per_round=per_round, rounds=ROUNDS, overrides=overrides)


class _Comparison:
    """One run's shared parts: the store, the engines (built when first needed), the meter."""

    def __init__(
        self,
        docs: Path,
        store: PageStore,
        encoder: PageEncoder,
        llm: LLM,
        pages: int,
    ) -> None:
        self.docs = docs
        self.store = store
        self.encoder = encoder
        self.llm = llm
        self.pages = pages
        self.configs = docmemo_configs(pages)
        self.page_tokens, self.budget_tokens = page_budget_tokens(store, pages)
        self._engines: dict[str, CompareEngine] = {}

    def engine(self, name: str) -> CompareEngine:
        if name not in self._engines:
            if name == DOCMEMO:
                budget = (
                    f"at most {self.pages} pages ({self.configs.rounds} rounds of "
                    f"{self.configs.pages_per_round}; mean page {self.page_tokens:.0f} tokens, "
                    f"{self.budget_tokens:,.0f} tokens), OCR'd pages included"
                )
                self._engines[name] = docmemo_engine(
                    store=self.store,
                    encoder=self.encoder,
                    llm=self.llm,
                    config=self.configs.for_engine(DOCMEMO),
                    budget=budget,
                )
            else:
                self._engines[name] = stock_engine(
                    name,
                    docs=self.docs,
                    store=self.store,
                    encoder=self.encoder,
                    llm=self.llm,
                    budget_tokens=self.budget_tokens,
                )
        return self._engines[name]

    def citations(self, reply: EngineReply, checked: Sequence[PageRef]) -> list[Citation]:
        """The reply's citations (:func:`.citing.answer_citations`), its claims checked against
        the store's text of the ``checked`` pages, OCR'd pages boxed as DocMemo's config says."""
        records = self.store.get_pages(list(checked), PageFilter())
        pages = [PageText(r.ref, r.text, r.ocr) for r in records]
        sources = {r.ref: r.source for r in records}
        ocr_pages = OCR_BOX_PAGES if self.configs.for_engine(DOCMEMO).answer.ocr_boxes else 0
        return answer_citations(reply, pages, sources, ocr_pages)

    def answer(self, question: Question, name: str) -> tuple[AnswerRecord, EngineReply | None]:
        """Ask ``name``; an engine that fails gives a record with the error, and the run goes on."""
        engine = self.engine(name)
        reply: EngineReply | None = None
        error: str | None = None
        started = time.perf_counter()
        with counting_llm_calls() as cost:  # LlamaIndex's LLM events, whoever makes the request
            try:
                reply = engine.answer(question.text)
            except Exception as exc:  # one engine's failure must not end the comparison
                error = f"{type(exc).__name__}: {exc}"
        record = AnswerRecord(
            qid=question.qid,
            question=question.text,
            expected=question.expected,
            engine=name,
            llm_calls=cost.calls,
            prompt_tokens=cost.prompt_tokens,
            completion_tokens=cost.completion_tokens,
            images=cost.images,
            image_tokens=cost.image_tokens,
            seconds=time.perf_counter() - started,
            requests_without_usage=cost.without_usage,
            error=error,
        )
        if reply is not None:
            record.answer = reply.answer
            record.cited_pages = [PageCitation.of(r) for r in reply.cited]
            record.read_pages = [PageCitation.of(r) for r in reply.read]
            record.citations = self.citations(reply, record.checked_pages)
        return record, reply


def _index(docs: Path, store: PageStore, encoder: PageEncoder, progress: bool) -> None:
    from llama_index_docmemo.indexing import DocumentIndexer

    report = DocumentIndexer(store, encoder).index_paths([docs], root=docs, progress=progress)
    if report.indexed or report.failed:
        print(report.summary(), file=sys.stderr)
    if store.count_pages(PageFilter()) == 0:
        raise DocMemoError(f"{docs}: no PDF pages to compare on ({report.summary()})")


def _ocr_pages(store: PageStore) -> tuple[int, int]:
    """(pages whose text came from OCR, all pages) in the store."""
    ocr = total = 0
    for schema in store.list_documents(PageFilter()):
        refs = [PageRef(schema.doc_id, p) for p in range(1, schema.n_pages + 1)]
        records = store.get_pages(refs, PageFilter())
        total += len(records)
        ocr += sum(r.ocr for r in records)
    return ocr, total


def compare(
    docs: str | Path,
    questions: str | Path | Sequence[Question],
    out: str | Path,
    *,
    engines: Sequence[str] = DEFAULT_ENGINES,
    llm: LLM | None = None,
    judge_llm: LLM | None = None,
    pages: int = 15,
    store: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Compare engines on ``docs`` with ``questions``; writes ``out``'s reports, returns
    ``report.json``'s content (settings, totals, every answer with its citations).

    Args:
        docs: folder of PDFs (indexed into the page store once; subfolders included).
        questions: a ``.jsonl`` / ``.csv`` / ``.txt`` file (:mod:`.questions`) or the questions.
        out: output folder: ``report.html``, ``report.md``, ``report.json``, ``results.jsonl``.
        engines: of :data:`~.engines.COMPARE_ENGINES`; "docmemo" is the reference of the totals.
        llm: the LLM every engine answers with (default ``Settings.llm``).
        judge_llm: the judge (LlamaIndex's evaluators); None: the exact rules only.
        pages: DocMemo's page budget; the stock engines get as many tokens of chunks.
        store: the page store folder (default ``out/store``).
        progress: show a progress bar.
    """
    from tqdm.auto import tqdm

    from llama_index_docmemo.encoders import default_encoder
    from llama_index_docmemo.evaluation.compare.report import write_reports
    from llama_index_docmemo.query_engine import configured_llm
    from llama_index_docmemo.store import open_store

    names = check_engines(engines)
    docs, out = Path(docs), Path(out)
    if not docs.is_dir():
        raise DocMemoError(f"{docs}: not a folder of PDFs")
    llm = llm or configured_llm()
    if llm is None:
        raise DocMemoError(
            "docmemo compare needs an LLM: --llm-url URL --llm-model NAME, or Settings.llm"
        )
    asked = questions if not isinstance(questions, (str, Path)) else load_questions(questions)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"docs": str(docs.resolve()), "llm": model_name(llm), "pages": pages}
    check_settings(out, settings)
    encoder = default_encoder()
    with open_store(path=Path(store) if store else out / "store", encoder=encoder) as page_store:
        _index(docs, page_store, encoder, progress)
        run = _Comparison(docs, page_store, encoder, llm, pages)
        records = load_records(out / RESULTS)
        todo = [(q, n) for q in asked for n in names if (q.qid, n) not in records]
        for question, name in tqdm(todo, disable=not progress, desc="compare", unit="answer"):
            record, reply = run.answer(question, name)
            records[record.key] = record
            append_jsonl(out / RESULTS, record)
            if reply is not None and reply.trace is not None:
                trace = reply.trace.model_dump(mode="json")
                append_jsonl(out / TRACES, {"qid": question.qid, "trace": trace})
        judge = AnswerJudge(judge_llm)
        judge_records(asked, names, records, judge, VerdictCache(out / VERDICTS), progress)
        current = [records[(q.qid, n)] for q in asked for n in names if (q.qid, n) in records]
        rewrite_records(out / RESULTS, current)
        ocr, total = _ocr_pages(page_store)
        budgets = {name: run.engine(name).budget for name in names}
        if ocr and DOCMEMO in names and not any(n.endswith("-ocr") for n in names):
            print(
                f"docmemo compare: {ocr} of {total} pages have no text layer; DocMemo reads their "
                "OCR text, the stock engines nothing: add stock-ocr to --engines to separate the "
                "method from OCR",
                file=sys.stderr,
            )
        meta = {
            **settings,
            "engines": names,
            "judge": judge.name if judge_llm is not None else None,
            "budgets": budgets,
            "ocr_pages": ocr,
            "pages_in_store": total,
            "questions": len(asked),
        }
        report = write_reports(out, asked, current, meta, page_store)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
