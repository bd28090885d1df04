"""``docmemo demo``: index the generated report into an embedded store and ask the demo questions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.demo.document import DEMO_QUESTIONS, DemoQuestion, write_demo_pdf
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.paths import default_cache_dir
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store.factory import open_store

DEMO_PDF_NAME = "halvorsen-annual-report-2024.pdf"
# Three pages a round out of 24: a first retrieval that can miss, as on a long real document.
DEMO_CONFIG = DocMemoConfig(pages_per_round=3)


@dataclass(frozen=True)
class DemoOutcome:
    """One demo question as DocMemo answered it, next to what the document says."""

    question: DemoQuestion
    answer: str
    status: str
    rounds: int
    pages_read: tuple[tuple[int, int], ...]  # (round, page)
    stop_reason: str

    @property
    def found_all_evidence(self) -> bool:
        read = {page for _, page in self.pages_read}
        return set(self.question.evidence_pages) <= read


def run_demo(
    cache_dir: str | Path | None = None,
    llm: Any | None = None,
    out: Callable[[str], None] = print,
) -> list[DemoOutcome]:
    """Write the demo report, index it (once) under ``cache_dir``, and answer the demo questions.

    Args:
        cache_dir: where the PDF and the embedded store live (default ``demo`` in the cache folder, ``$DOCMEMO_CACHE_DIR``).
        llm: a VLM to reason with; None uses the offline reasoner (no model, no key).
        out: where the per-round summary is written.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "demo"
    pdf = write_demo_pdf(cache / DEMO_PDF_NAME)
    encoder = default_encoder()
    outcomes: list[DemoOutcome] = []
    with open_store(cache / "store", encoder=encoder) as store:
        report = DocumentIndexer(store, encoder, ocr=False).index_paths([pdf])
        out(f"Indexed {pdf} ({report.summary()})")
        engine = DocMemoQueryEngine.from_defaults(
            store=store, encoder=encoder, llm=llm, config=DEMO_CONFIG
        )
        for q in DEMO_QUESTIONS:
            result = engine.run(q.question)
            trace = result.trace
            outcome = DemoOutcome(
                question=q,
                answer=result.answer,
                status=result.status,
                rounds=len(trace.rounds),
                pages_read=tuple((p.round, p.page) for p in trace.pages_read),
                stop_reason=str(trace.stop_reason),
            )
            outcomes.append(outcome)
            _print(outcome, trace, out)
    return outcomes


def _print(outcome: DemoOutcome, trace: Any, out: Callable[[str], None]) -> None:
    q = outcome.question
    out("")
    out(f"Q: {q.question}")
    for rnd in trace.rounds:
        pages = ", ".join(str(s.page) for s in rnd.selected)
        fb = rnd.feedback
        verdict = fb.status if fb else "-"
        useful = ", ".join(str(s.page) for s in fb.useful) if fb else ""
        out(
            f"  round {rnd.round}: query={rnd.query!r} read [{pages}] -> {verdict}; useful [{useful}]"
        )
    evidence = ", ".join(str(p) for p in q.evidence_pages)
    found = "all found" if outcome.found_all_evidence else "not all read"
    out(f"A: {outcome.answer}")
    out(
        f"   expected: {q.answer} (evidence pages {evidence}: {found}; stop: {outcome.stop_reason})"
    )
