"""``docmemo demo``: index the generated report into an embedded store, ask the demo questions,
write each answer's page (citations, evidence pages) and say what to run next."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index_docmemo.cli.rounds import round_line
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.demo.document import DEMO_QUESTIONS, DemoQuestion, write_demo_pdf
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.evidence.html import write_answer_html
from llama_index_docmemo.evidence.matching import find_figures, locate_span
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.paths import default_cache_dir
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.offline import OfflineReader
from llama_index_docmemo.store.factory import open_store

DEMO_PDF_NAME = "halvorsen-annual-report-2024.pdf"
# Three pages a round out of 24: a first retrieval that can miss, as on a long real document.
DEMO_CONFIG = DocMemoConfig(pages_per_round=3)
OFFLINE_NOTE = (
    "Reader: the offline reader (no LLM configured). It reads the pages' text and answers when a "
    "sentence or table row states the asked figure, date or name beside the question's words, as "
    "this report's pages do; on most real documents it returns the best passages instead. Give "
    "it a model with --llm-url URL --llm-model NAME."
)
NEXT_STEPS = (
    "Next, on your own PDFs:",
    "  docmemo index ./my-pdfs --store ./docmemo_store        # index your folder (embedded Qdrant)",
    '  docmemo ask "What was the operating margin in 2024?" --store ./docmemo_store \\',
    "    --llm-url http://localhost:8000/v1 --llm-model NAME --html answer.html   # ask with your LLM",
    "  docmemo compare --docs ./my-pdfs --questions questions.jsonl --out runs/compare"
    "   # against stock LlamaIndex engines",
)
"""The three commands the demo ends with (docs/cli.md describes each)."""


@dataclass(frozen=True)
class DemoOutcome:
    """One demo question as DocMemo answered it, next to what the document says."""

    question: DemoQuestion
    answer: str
    status: str
    rounds: int
    pages_read: tuple[tuple[int, int], ...]  # (round, page)
    stop_reason: str
    html: Path  # the answer's page: citations and evidence pages

    @property
    def found_all_evidence(self) -> bool:
        read = {page for _, page in self.pages_read}
        return set(self.question.evidence_pages) <= read

    @property
    def agrees(self) -> bool:
        """Whether the answer states the expected answer's first figure (by value, as a page
        would: :func:`~llama_index_docmemo.evidence.matching.locate_span`)."""
        expected = find_figures(self.question.answer)
        return bool(expected) and locate_span(expected[0], self.answer) is not None


def run_demo(
    cache_dir: str | Path | None = None,
    llm: Any | None = None,
    out: Callable[[str], None] = print,
) -> list[DemoOutcome]:
    """Write the demo report, index it (once) under ``cache_dir``, answer the demo questions and
    write each answer's page (``answers/answer-N.html`` under ``cache_dir``).

    Args:
        cache_dir: where the PDF and the embedded store live (default ``demo`` in the cache folder, ``$DOCMEMO_CACHE_DIR``).
        llm: a VLM to reason with; None uses the offline reader (no model, no key).
        out: where the per-round summary, the summary and the next steps are written.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "demo"
    pdf = write_demo_pdf(cache / DEMO_PDF_NAME)
    encoder = default_encoder()
    outcomes: list[DemoOutcome] = []
    with open_store(cache / "store", encoder=encoder) as store:
        report = DocumentIndexer(store, encoder, ocr=False).index_paths([pdf])
        out(f"Indexed {pdf} ({report.summary()})")
        engine = DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=encoder,
            llm=llm,
            reader=OfflineReader() if llm is None else None,
            config=DEMO_CONFIG,
        )
        if llm is None:
            out(OFFLINE_NOTE)
        answers = cache / "answers"
        answers.mkdir(exist_ok=True)
        for n, q in enumerate(DEMO_QUESTIONS, start=1):
            result = engine.run(q.question)
            trace = result.trace
            page = answers / f"answer-{n}.html"
            write_answer_html(page, result)
            outcome = DemoOutcome(
                question=q,
                answer=result.answer,
                status=result.status,
                rounds=len(trace.rounds),
                pages_read=tuple((p.round, p.page) for p in trace.pages_read),
                stop_reason=str(trace.stop_reason),
                html=page,
            )
            outcomes.append(outcome)
            _print(outcome, trace, out)
    _summary(outcomes, out)
    return outcomes


def _print(outcome: DemoOutcome, trace: Any, out: Callable[[str], None]) -> None:
    q = outcome.question
    out("")
    out(f"Q: {q.question}")
    for rnd in trace.rounds:
        out(round_line(rnd))
    evidence = ", ".join(str(p) for p in q.evidence_pages)
    found = "all read" if outcome.found_all_evidence else "not all read"
    out(f"A: {outcome.answer}")
    out(
        f"   expected: {q.answer} (evidence pages {evidence}: {found}; stop: {outcome.stop_reason})"
    )
    out(f"   answer page (citations, evidence pages): {outcome.html}")


def _summary(outcomes: list[DemoOutcome], out: Callable[[str], None]) -> None:
    agree = sum(o.agrees for o in outcomes)
    found = sum(o.found_all_evidence for o in outcomes)
    out("")
    out(
        f"{agree} of {len(outcomes)} answers agree with the report; every evidence page read for "
        f"{found} of {len(outcomes)} questions. Each figure of an answer is checked against the "
        "pages read (a computed one against the figures it is computed from)."
    )
    out("")
    for line in NEXT_STEPS:
        out(line)
