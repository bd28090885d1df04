"""``report.html`` of a comparison: one self-contained page that opens offline.

Totals on top, then per question the engines' answers side by side: each answer with its figures
and names marked verified (on a page it cited or read) or unverified, its verdicts (with the
judge), its citations linked to thumbnails of their pages with the cited boxes drawn (the parts of
:mod:`llama_index_docmemo.evidence.html`, shared with ``docmemo ask --html``), its cost; DocMemo's
answer also shows its belief heat-map (pages x rounds). Inline CSS, no scripts, no fonts or files
from the network: the thumbnails are PNG files in ``pages/`` beside the report.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index_docmemo.evaluation.compare.markdown import (
    TOTALS_TITLE,
    VERSUS_TITLE,
    Table,
    setting_lines,
    title,
    totals_table,
    verdict_text,
    versus_table,
)
from llama_index_docmemo.evaluation.compare.questions import Question
from llama_index_docmemo.evaluation.compare.records import AnswerRecord
from llama_index_docmemo.evaluation.compare.thumbnails import Thumbnail
from llama_index_docmemo.evidence.html import (
    CITATION_CSS,
    DOCUMENTS_LEGEND,
    Anchor,
    citation_list,
    cited_boxes,
    document_table,
    marked_answer,
    page_anchor,
    page_figure,
)
from llama_index_docmemo.evidence.pages import Box
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRef
from llama_index_docmemo.visualize import (
    HEAT_MAP_CSS,
    HEAT_MAP_LEGEND,
    belief_scale,
    heat_map,
    heat_map_table,
)

MAX_THUMBNAILS = 6
ThumbnailFor = Callable[[str, int, Sequence[Box]], "Thumbnail | None"]
"""(doc, page, boxes to draw) -> the page's thumbnail, or None when it cannot be rendered."""

CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;margin:24px;"
    "color:#1d1d1f;max-width:1600px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-top:1px solid #ddd;padding-top:14px}"
    "table.totals{border-collapse:collapse;margin:8px 0 16px}"
    ".totals td,.totals th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    ".totals th{background:#f4f4f6}"
    ".answers{display:grid;gap:14px;align-items:start}"
    ".answer{border:1px solid #d0d0d6;border-radius:6px;padding:10px 12px;background:#fcfcfd}"
    ".answer h3{margin:0 0 6px;font-size:15px}.text{white-space:pre-wrap;line-height:1.45}"
    ".meta{color:#555;font-size:12px;margin:4px 0}.error{color:#b42318;font-weight:600}"
    ".thumbs{display:flex;flex-wrap:wrap;gap:8px;margin-top:8px}"
    ".thumbs figure{margin:0;width:220px}.thumbs img{width:220px;height:auto;"
    "border:1px solid #bbb;display:block}.thumbs figcaption{font-size:11px;color:#444}"
    ".expected{background:#f0f4ff;padding:6px 10px;border-radius:4px}"
    "details{margin-top:8px}" + CITATION_CSS + HEAT_MAP_CSS
)


def _e(text: object) -> str:
    return html.escape(str(text))


def _inline(markdown: str) -> str:
    """One line of the Markdown report as HTML: ``**bold**`` and ```code``` spans, the rest escaped."""
    escaped = _e(markdown)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def _table(table: Table) -> str:
    header, rows = table
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="totals"><tr>{head}</tr>{body}</table>'


def _thumbnails(record: AnswerRecord, anchor: Anchor, thumbnail_for: ThumbnailFor) -> str:
    """Every page a verified citation stands on, with its boxes drawn, then the other cited
    pages up to ``MAX_THUMBNAILS`` in all."""
    pages: dict[PageRef, list[list[float]] | None] = dict(cited_boxes(record.citations))
    for citation in record.cited_pages:
        if len(pages) >= MAX_THUMBNAILS:
            break
        pages.setdefault(citation.ref, None)
    figures = []
    for ref, boxes in pages.items():
        thumb = thumbnail_for(ref.doc_id, ref.page, boxes or [])
        shown = (thumb.path, thumb.width, thumb.height) if thumb is not None else None
        count = None if boxes is None else len(boxes)
        figures.append(page_figure(anchor(ref), f"{ref.doc_id} p.{ref.page}", shown, count))
    more = len({c.ref for c in record.cited_pages} - set(pages))
    extra = f'<p class="meta">and {more} more cited pages</p>' if more > 0 else ""
    return f'<div class="thumbs">{"".join(figures)}</div>{extra}' if figures else ""


def _citations(record: AnswerRecord, anchor: Anchor) -> str:
    verified = sum(f.verified for f in record.figures)
    return (
        f'<p class="meta">Verified figures (on pages cited or read): {verified}/'
        f"{len(record.figures)}</p><details open><summary>Citations</summary>"
        f"{citation_list(record.citations, anchor)}</details>"
    )


def _answer_card(
    record: AnswerRecord, trace: QueryTrace | None, thumbnail_for: ThumbnailFor
) -> str:
    def anchor(ref: PageRef) -> str:
        return page_anchor(ref, prefix=f"{record.qid}-{record.engine}")

    if record.error:
        body = f'<p class="error">{_e(record.error)}</p>'
    else:
        body = f'<p class="text">{marked_answer(record.answer, record.citations)}</p>'
    read = ", ".join(f"{p.doc_id} p.{p.page}" for p in record.read_pages) or "none"
    usage = (
        f" ({record.requests_without_usage} counted by the tokenizer)"
        if record.requests_without_usage
        else ""
    )
    parts = [
        f'<article class="answer" data-engine="{_e(record.engine)}"><h3>{_e(record.engine)}</h3>',
        body,
        f'<p class="meta">Verdict: {_e(verdict_text(record))}</p>',
        _citations(record, anchor),
        f'<p class="meta">Cost: {record.llm_calls} LLM calls, {record.prompt_tokens} prompt + '
        f"{record.completion_tokens} completion tokens{_e(usage)}, {record.images} images "
        f"(about {record.image_tokens} image tokens), "
        f"{record.seconds:.1f} s</p>",
        f'<p class="meta">Read: {_e(read)}</p>',
        _thumbnails(record, anchor, thumbnail_for),
    ]
    if trace is not None and trace.rounds:
        parts.append(
            "<details open><summary>Belief heat-map (DocMemo)</summary>"
            f'<p class="meta">{_e(HEAT_MAP_LEGEND)}</p>{belief_scale()}'
            f"{heat_map_table(heat_map(trace))}</details>"
        )
        documents = document_table(trace.rounds[-1].documents)
        if documents:
            parts.append(
                "<details open><summary>Document beliefs (DocMemo)</summary>"
                f'<p class="meta">{_e(DOCUMENTS_LEGEND)}</p>{documents}</details>'
            )
    parts.append("</article>")
    return "".join(parts)


def render_html(
    meta: Mapping[str, Any],
    totals: Mapping[str, Any],
    questions: Sequence[Question],
    by_question: Mapping[str, Sequence[AnswerRecord]],
    traces: Mapping[str, QueryTrace],
    thumbnail_for: ThumbnailFor,
) -> str:
    """The whole report as one HTML document."""
    settings = "".join(
        f"<p>{_inline(line.removeprefix('- '))}</p>" for line in setting_lines(meta) if line.strip()
    )
    sections = [
        f"<h1>{_e(title(meta))}</h1>",
        f'<section id="settings">{settings}</section>',
        f'<section id="totals"><h2>{_e(TOTALS_TITLE.lstrip("# "))}</h2>{_table(totals_table(totals))}',
    ]
    if totals["versus"]:
        sections.append(f"<h2>{_e(VERSUS_TITLE.lstrip('# '))}</h2>{_table(versus_table(totals))}")
    sections.append("</section>")
    columns = len(meta["engines"])
    for question in questions:
        records = by_question.get(question.qid, [])
        cards = "".join(
            _answer_card(
                r, traces.get(question.qid) if r.engine == "docmemo" else None, thumbnail_for
            )
            for r in records
        )
        expected = (
            f'<p class="expected">Expected: {_e(question.expected)}</p>'
            if question.expected is not None
            else ""
        )
        sections.append(
            f'<section class="question" id="q-{_e(question.qid)}">'
            f"<h2>{_e(question.qid)}: {_e(question.text)}</h2>{expected}"
            f'<div class="answers" style="grid-template-columns:repeat({columns},minmax(0,1fr))">'
            f"{cards}</div></section>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title(meta))}</title><style>{CSS}</style></head><body>"
        + "".join(sections)
        + "</body></html>\n"
    )
