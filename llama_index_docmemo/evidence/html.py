"""``docmemo ask --html``: the answer, its citations linked to thumbnails of the cited pages with
the cited boxes drawn. One self-contained file (thumbnails inline as PNG data), no scripts, nothing
from the network.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from llama_index_docmemo.evidence.citations import Citation
from llama_index_docmemo.evidence.pages import PAGE_ERRORS, render_page_boxed
from llama_index_docmemo.types import PageRef

CSS = (
    "body{font-family:system-ui,sans-serif;font-size:15px;margin:24px;color:#1d1d1f;"
    "max-width:1200px}.answer{white-space:pre-wrap;line-height:1.5;font-size:17px}"
    "mark.verified{background:#c8f0c8;border-bottom:2px solid #2a8a2a}"
    "mark.unverified{background:#fbd3d3;border-bottom:2px solid #b42318}"
    "ol.citations li{margin:6px 0}.quote{color:#444;font-style:italic}"
    ".no{color:#b42318;font-weight:600}.pages{display:flex;flex-wrap:wrap;gap:14px}"
    ".pages figure{margin:0}.pages img{border:1px solid #bbb;display:block}"
    ".pages figcaption{font-size:12px;color:#444}"
)


def _e(text: object) -> str:
    return html.escape(str(text))


def _anchor(ref: PageRef) -> str:
    return "page-" + "".join(ch if ch.isalnum() else "-" for ch in ref.doc_id) + f"-{ref.page}"


def marked_answer(answer: str, citations: Sequence[Citation]) -> str:
    """The answer, HTML-escaped, each cited figure or name marked verified or not (where the
    answer still writes it at its span: ``[n]`` markers shift the text)."""
    spans = sorted(
        {
            (c.answer_span, c.verified)
            for c in citations
            if c.answer_span is not None and answer[c.answer_span[0] : c.answer_span[1]] == c.text
        },
        key=lambda item: item[0],
    )
    out, at = [], 0
    for (start, end), verified in spans:
        if start < at:
            continue
        css = "verified" if verified else "unverified"
        out += [_e(answer[at:start]), f'<mark class="{css}">{_e(answer[start:end])}</mark>']
        at = end
    out.append(_e(answer[at:]))
    return "".join(out)


def _citation_item(c: Citation) -> str:
    if not c.verified or c.ref is None:
        return f'<li><b>{_e(c.text)}</b>: <span class="no">not found on the pages read</span></li>'
    box = "box " + ", ".join(f"{v:.0f}" for v in c.bbox) if c.bbox else "no box"
    where = f'<a href="#{_anchor(c.ref)}">{_e(c.ref.doc_id)} p. {c.ref.page}</a>'
    return (
        f"<li><b>{_e(c.text)}</b> ({c.kind}): {where}, {_e(c.how)}, {_e(box)}"
        f'<div class="quote">“{_e(c.quote)}”</div></li>'
    )


def _thumbnail(ref: PageRef, source: str | Path, boxes: Sequence[Sequence[float]]) -> str:
    caption = f"{ref.doc_id} p. {ref.page}"
    try:
        image = render_page_boxed(source, ref.page, boxes)
    except PAGE_ERRORS:
        return f'<figure id="{_anchor(ref)}"><figcaption>{_e(caption)}: not renderable</figcaption></figure>'
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (
        f'<figure id="{_anchor(ref)}"><img src="data:image/png;base64,{data}" '
        f'width="{image.width}" height="{image.height}" alt="{_e(caption)}">'
        f"<figcaption>{_e(caption)}: {len(boxes)} cited box(es)</figcaption></figure>"
    )


def render_answer_html(
    question: str,
    answer: str,
    citations: Sequence[Citation],
    sources: Mapping[str, str | Path],
) -> str:
    """The page of one answer: the question, the answer with its claims marked, the citations
    (each linked to its page), and a thumbnail of every cited page with its boxes drawn
    (``sources``: each document's PDF)."""
    pages: dict[PageRef, list[list[float]]] = {}
    for c in citations:
        if c.verified and c.ref is not None:
            pages.setdefault(c.ref, [])
            if c.bbox:
                pages[c.ref].append(c.bbox)
    items = "".join(_citation_item(c) for c in citations)
    thumbs = "".join(
        _thumbnail(ref, sources[ref.doc_id], boxes)
        for ref, boxes in pages.items()
        if ref.doc_id in sources
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>DocMemo: {_e(question)}</title><style>{CSS}</style></head><body>"
        f"<h1>{_e(question)}</h1>"
        f'<p class="answer">{marked_answer(answer, citations)}</p>'
        f'<h2>Citations</h2><ol class="citations">{items or "<li>none</li>"}</ol>'
        f'<h2>Cited pages</h2><div class="pages">{thumbs}</div></body></html>'
    )
