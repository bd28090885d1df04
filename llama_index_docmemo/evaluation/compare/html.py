"""``report.html`` of a comparison: one self-contained page that opens offline.

Totals on top, then per question the engines' answers side by side: each answer with its figures
marked (found on a page it cited or read, or not), its verdicts (with the judge), its cost, and
thumbnails of the pages it cites with the found figures boxed; DocMemo's answer also shows its belief
heat-map (pages x rounds). Inline CSS, no scripts, no fonts or files from the network: the
thumbnails are PNG files in ``pages/`` beside the report.
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
from llama_index_docmemo.evaluation.compare.records import AnswerRecord, FigureRecord
from llama_index_docmemo.evaluation.compare.thumbnails import Thumbnail
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.visualize import HEAT_MAP_CSS, HEAT_MAP_LEGEND, heat_map, heat_map_table

MAX_THUMBNAILS = 6
ThumbnailFor = Callable[[str, int, Sequence[str]], "Thumbnail | None"]
"""(doc, page, texts to box) -> the page's thumbnail, or None when it cannot be rendered."""

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
    "mark.found{background:#c8f0c8;border-bottom:2px solid #2a8a2a}"
    "mark.missing{background:#fbd3d3;border-bottom:2px solid #b42318}"
    ".meta{color:#555;font-size:12px;margin:4px 0}.error{color:#b42318;font-weight:600}"
    ".thumbs{display:flex;flex-wrap:wrap;gap:8px;margin-top:8px}"
    ".thumbs figure{margin:0;width:150px}.thumbs img{width:150px;height:auto;"
    "border:1px solid #bbb;display:block}.thumbs figcaption{font-size:11px;color:#444}"
    ".expected{background:#f0f4ff;padding:6px 10px;border-radius:4px}"
    "details{margin-top:8px}" + HEAT_MAP_CSS
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


def marked_answer(answer: str, figures: Sequence[FigureRecord]) -> str:
    """The answer, escaped, with each checked figure in a ``<mark>``: found or missing."""
    out: list[str] = []
    position = 0
    for figure in figures:
        start = answer.find(figure.text, position)
        if start < 0:
            continue
        where = ", ".join(f"{p.doc} p.{p.page}" for p in figure.pages)
        tip = f"found on {where}" if figure.found else "not on any page cited or read"
        kind = "found" if figure.found else "missing"
        out.append(_e(answer[position:start]))
        out.append(f'<mark class="{kind}" title="{_e(tip)}">{_e(figure.text)}</mark>')
        position = start + len(figure.text)
    out.append(_e(answer[position:]))
    return "".join(out)


def _thumbnails(record: AnswerRecord, thumbnail_for: ThumbnailFor) -> str:
    figures: list[str] = []
    for citation in record.cited_pages[:MAX_THUMBNAILS]:
        key = f"{citation.doc}#{citation.page}"
        marks = sorted({f.matches[key] for f in record.figures if key in f.matches})
        thumb = thumbnail_for(citation.doc, citation.page, marks)
        label = f"{citation.doc} p.{citation.page}"
        if thumb is None:
            figures.append(f"<figure><figcaption>{_e(label)}: not renderable</figcaption></figure>")
            continue
        unboxed = [m for m in marks if m not in thumb.boxed]
        note = ""
        if thumb.boxed:
            note += " · boxed: " + ", ".join(thumb.boxed)
        if unboxed:
            note += " · in the page's OCR text (no position): " + ", ".join(unboxed)
        figures.append(
            f'<figure><img src="{_e(thumb.path)}" alt="{_e(label)}" width="{thumb.width}" '
            f'height="{thumb.height}"><figcaption>{_e(label + note)}</figcaption>'
            "</figure>"
        )
    more = len(record.cited_pages) - MAX_THUMBNAILS
    extra = f'<p class="meta">and {more} more cited pages</p>' if more > 0 else ""
    return f'<div class="thumbs">{"".join(figures)}</div>{extra}' if figures else ""


def _answer_card(
    record: AnswerRecord, trace: QueryTrace | None, thumbnail_for: ThumbnailFor
) -> str:
    if record.error:
        body = f'<p class="error">{_e(record.error)}</p>'
    else:
        body = f'<p class="text">{marked_answer(record.answer, record.figures)}</p>'
    found = sum(f.found for f in record.figures)
    read = ", ".join(f"{p.doc} p.{p.page}" for p in record.read_pages) or "none"
    usage = (
        f" ({record.requests_without_usage} without usage)" if record.requests_without_usage else ""
    )
    parts = [
        f'<article class="answer" data-engine="{_e(record.engine)}"><h3>{_e(record.engine)}</h3>',
        body,
        f'<p class="meta">Verdict: {_e(verdict_text(record))}</p>',
        f'<p class="meta">Figures found on pages cited or read: {found}/{len(record.figures)}</p>',
        f'<p class="meta">Cost: {record.llm_calls} LLM calls, {record.prompt_tokens} prompt + '
        f"{record.completion_tokens} completion tokens{_e(usage)}, {record.images} images "
        f"(about {record.image_tokens} image tokens), "
        f"{record.seconds:.1f} s</p>",
        f'<p class="meta">Read: {_e(read)}</p>',
        _thumbnails(record, thumbnail_for),
    ]
    if trace is not None and trace.rounds:
        parts.append(
            "<details open><summary>Belief heat-map (DocMemo)</summary>"
            f'<p class="meta">{_e(HEAT_MAP_LEGEND)}</p>{heat_map_table(heat_map(trace))}</details>'
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
