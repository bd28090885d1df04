"""Citations as HTML: the answer with its claims marked, the citations linked to thumbnails of the
cited pages with the cited boxes drawn.

The parts (:func:`marked_answer`, :func:`citation_list`, :func:`cited_boxes`,
:func:`page_figure`, ``CITATION_CSS``) are shared by ``docmemo ask --html``
(:func:`render_answer_html`: one self-contained file, thumbnails inline as PNG data) and
``docmemo compare``'s report (thumbnails as files beside it, one answer card per engine). No
scripts, nothing from the network.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image

from llama_index_docmemo.evidence.citations import Citation
from llama_index_docmemo.evidence.pages import PAGE_ERRORS, render_page_boxed
from llama_index_docmemo.types import PageRef

if TYPE_CHECKING:
    from llama_index_docmemo.loop import DocMemoResult
    from llama_index_docmemo.trace import DocumentBelief

CITATION_CSS = (
    "mark.verified{background:#c8f0c8;border-bottom:2px solid #2a8a2a}"
    "mark.unverified{background:#fbd3d3;border-bottom:2px solid #b42318}"
    "ol.citations li{margin:6px 0}.quote{color:#444;font-style:italic}"
    ".no{color:#b42318;font-weight:600}.pages{display:flex;flex-wrap:wrap;gap:14px}"
    ".pages figure{margin:0}.pages img{border:1px solid #bbb;display:block}"
    ".pages figcaption{font-size:12px;color:#444}"
)
"""The marks, the citation list and the page figures, in both pages."""
CSS = (
    "body{font-family:system-ui,sans-serif;font-size:15px;margin:24px;color:#1d1d1f;"
    "max-width:1200px}.answer{white-space:pre-wrap;line-height:1.5;font-size:17px}" + CITATION_CSS
)
Anchor = Callable[[PageRef], str]
"""A cited page -> the id of its figure in the page (unique in the document)."""


def _e(text: object) -> str:
    return html.escape(str(text))


def page_anchor(ref: PageRef, prefix: str = "page") -> str:
    """An HTML id for ``ref``'s figure: ``prefix``, the document id and page, letters and digits
    only (``prefix`` tells apart the figures of several answers in one page)."""
    return "-".join(
        "".join(ch if ch.isalnum() else "-" for ch in part)
        for part in (prefix, ref.doc_id, str(ref.page))
    )


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


def _citation_item(c: Citation, anchor: Anchor) -> str:
    if c.how == "computed":
        return (
            f'<li class="verified"><b>{_e(c.text)}</b> ({c.kind}): computed from the cited '
            f"figures, {_e(c.computed)}</li>"
        )
    if not c.verified or c.ref is None:
        return (
            f'<li class="unverified"><b>{_e(c.text)}</b>: '
            '<span class="no">unverified: not found on the pages read</span></li>'
        )
    box = "box " + ", ".join(f"{v:.0f}" for v in c.bbox) if c.bbox else "no box"
    where = f'<a href="#{anchor(c.ref)}">{_e(c.ref.doc_id)} p. {c.ref.page}</a>'
    return (
        f'<li class="verified"><b>{_e(c.text)}</b> ({c.kind}): verified on {where}, '
        f'{_e(c.how)}, {_e(box)}<div class="quote">“{_e(c.quote)}”</div></li>'
    )


def citation_list(citations: Sequence[Citation], anchor: Anchor = page_anchor) -> str:
    """The citations as an ordered list, each verified one linked to its page's figure."""
    items = "".join(_citation_item(c, anchor) for c in citations)
    return f'<ol class="citations">{items or "<li>none</li>"}</ol>'


def cited_boxes(citations: Sequence[Citation]) -> dict[PageRef, list[list[float]]]:
    """The pages of the verified citations, in order, each with its citations' boxes."""
    pages: dict[PageRef, list[list[float]]] = {}
    for c in citations:
        if c.verified and c.ref is not None:
            pages.setdefault(c.ref, [])
            if c.bbox:
                pages[c.ref].append(c.bbox)
    return pages


def page_figure(
    anchor: str, caption: str, image: tuple[str, int, int] | None, boxes: int | None
) -> str:
    """A page's ``<figure>``: ``image`` is (src, width, height), None when the page could not be
    rendered; ``boxes`` the cited boxes drawn on it (None: a page cited without a box)."""
    if image is None:
        return f'<figure id="{_e(anchor)}"><figcaption>{_e(caption)}: not renderable</figcaption></figure>'
    src, width, height = image
    drawn = f": {boxes} cited box(es)" if boxes is not None else ""
    return (
        f'<figure id="{_e(anchor)}"><img src="{_e(src)}" width="{width}" height="{height}" '
        f'alt="{_e(caption)}"><figcaption>{_e(caption + drawn)}</figcaption></figure>'
    )


def data_uri(image: Image.Image) -> str:
    """``image`` as an inline PNG ``src``."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _inline_thumbnail(
    ref: PageRef, source: str | Path, boxes: Sequence[Sequence[float]] | None, caption: str
) -> str:
    try:
        image = render_page_boxed(source, ref.page, boxes or [])
    except PAGE_ERRORS:
        shown = None
    else:
        shown = (data_uri(image), image.width, image.height)
    count = None if boxes is None else len(boxes)
    return page_figure(page_anchor(ref), caption, shown, count)


def evidence_thumbnails(
    citations: Sequence[Citation],
    evidence: Sequence[tuple[PageRef, float]],
    sources: Mapping[str, str | Path],
) -> str:
    """Every page a verified citation stands on (its boxes drawn), then every evidence page (the
    reader judged it useful or quoted it; with its belief) not among them: the pages a reader of
    the answer checks, shown even when no figure of the answer verifies."""
    belief = dict(evidence)
    pages: dict[PageRef, list[list[float]] | None] = dict(cited_boxes(citations))
    for ref, _ in evidence:
        pages.setdefault(ref, None)
    figures = []
    for ref, boxes in pages.items():
        if ref.doc_id not in sources:
            continue
        caption = f"{ref.doc_id} p. {ref.page}"
        if ref in belief:
            caption += f", evidence (belief {belief[ref]:.2f})"
        figures.append(_inline_thumbnail(ref, sources[ref.doc_id], boxes, caption))
    return "".join(figures)


def render_answer_html(
    question: str,
    answer: str,
    citations: Sequence[Citation],
    sources: Mapping[str, str | Path],
    evidence: Sequence[tuple[PageRef, float]] = (),
    documents: Sequence[DocumentBelief] = (),
) -> str:
    """The page of one answer: the question, the answer with its claims marked, the citations
    (each linked to its page), a thumbnail of every cited page with its boxes drawn and of
    every ``evidence`` page (with its belief; ``sources``: each document's PDF), and over
    several documents their beliefs at the end (``documents``)."""
    thumbs = evidence_thumbnails(citations, evidence, sources)
    empty = "<p>none: no page read was judged useful and no figure of the answer is on one</p>"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>DocMemo: {_e(question)}</title><style>{CSS}</style></head><body>"
        f"<h1>{_e(question)}</h1>"
        f'<p class="answer">{marked_answer(answer, citations)}</p>'
        f"<h2>Citations</h2>{citation_list(citations)}"
        "<h2>Evidence pages</h2><p>The pages the cited figures stand on (boxes drawn) and the "
        "pages the reader judged useful, with their document.</p>"
        f'<div class="pages">{thumbs}</div>{"" if thumbs else empty}'
        f"{_documents_section(documents)}</body></html>"
    )


def document_table(documents: Sequence[DocumentBelief]) -> str:
    """The documents a whole-collection question weighed, best-believed first: the belief that
    each holds the evidence (posterior mean, with its Beta) and the pages the last round gave it.
    The answer page and the compare report show the same table."""
    if not documents:
        return ""
    rows = "".join(
        f"<tr><td>{_e(d.doc_id)}</td><td>{d.mean:.2f}</td>"
        f"<td>Beta({d.alpha:.2f}, {d.beta:.2f})</td><td>{d.pages}</td></tr>"
        for d in sorted(documents, key=lambda d: -d.mean)
    )
    return (
        '<table class="documents"><thead><tr><th>document</th><th>belief</th><th>Beta</th>'
        f"<th>pages in the last round</th></tr></thead><tbody>{rows}</tbody></table>"
    )


DOCUMENTS_LEGEND = (
    "The question named no document: the documents it was weighed against, by the belief that "
    "each holds the evidence, after the last round."
)


def _documents_section(documents: Sequence[DocumentBelief]) -> str:
    table = document_table(documents)
    return f"<h2>Documents</h2><p>{DOCUMENTS_LEGEND}</p>{table}" if table else ""


def write_answer_html(path: Path, result: DocMemoResult) -> None:
    """The answer page of ``result`` (``docmemo ask --html``, ``docmemo demo``) at ``path``: its
    documents' PDFs are those of its source nodes."""
    sources = {
        str(n.node.metadata["doc_id"]): str(n.node.metadata["source"]) for n in result.source_nodes
    }
    trace = result.trace
    evidence = [(PageRef(e.doc_id, e.page), e.score) for e in trace.evidence]
    documents = trace.rounds[-1].documents if trace.rounds else []
    page = render_answer_html(
        trace.question, result.answer, trace.citations, sources, evidence, documents
    )
    path.write_text(page, encoding="utf-8")
