"""Writing a comparison's reports: ``report.md``, ``report.html`` (with ``pages/`` thumbnails), and
what ``report.json`` holds (the settings, the totals, every answer with its citations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.evaluation.compare.engines import DOCMEMO
from llama_index_docmemo.evaluation.compare.html import render_html
from llama_index_docmemo.evaluation.compare.markdown import render_markdown
from llama_index_docmemo.evaluation.compare.questions import Question
from llama_index_docmemo.evaluation.compare.records import TRACES, AnswerRecord, load_traces
from llama_index_docmemo.evaluation.compare.thumbnails import Thumbnail, render_thumbnail
from llama_index_docmemo.evaluation.compare.totals import compare_totals
from llama_index_docmemo.evidence.pages import Box
from llama_index_docmemo.store.scope import PageFilter

if TYPE_CHECKING:
    from llama_index_docmemo.store.base import PageStore

THUMBNAILS = "pages"


def write_reports(
    out: Path,
    questions: Sequence[Question],
    records: Sequence[AnswerRecord],
    meta: Mapping[str, Any],
    store: PageStore,
) -> dict[str, Any]:
    """Totals, ``report.md`` and ``report.html`` into ``out``; returns ``{**meta, "totals",
    "answers"}`` (``answers``: the records, as ``results.jsonl`` has them, citations included)."""
    engines: list[str] = list(meta["engines"])
    by_engine = {name: [r for r in records if r.engine == name] for name in engines}
    by_question: dict[str, list[AnswerRecord]] = {}
    for record in records:
        by_question.setdefault(record.qid, []).append(record)
    totals = compare_totals(by_engine, DOCMEMO)
    sources = {s.doc_id: s.source for s in store.list_documents(PageFilter())}

    def thumbnail_for(doc_id: str, page: int, boxes: Sequence[Box]) -> Thumbnail | None:
        source = sources.get(doc_id)
        if not source:
            return None
        return render_thumbnail(source, doc_id, page, boxes, out / THUMBNAILS)

    (out / "report.md").write_text(
        render_markdown(meta, totals, questions, by_question), encoding="utf-8"
    )
    traces = load_traces(out / TRACES)
    (out / "report.html").write_text(
        render_html(meta, totals, questions, by_question, traces, thumbnail_for), encoding="utf-8"
    )
    answers = [r.model_dump(mode="json") for r in records]
    return {**meta, "totals": totals, "answers": answers}
