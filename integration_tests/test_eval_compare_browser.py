"""``report.html`` in a real browser: headless Chromium (Debian's ``chromium``) opens it offline,
and both engines' answers render side by side, each with its citations linked to thumbnails of
their pages with the cited boxes drawn, and a figure planted in the stock answer shown unverified.

Chromium is driven over the DevTools protocol on a pipe (:mod:`chromium`), so nothing beyond the
browser is needed. Every request the page makes is recorded: all must be files beside the report. The screenshot is read where the
page says each card's answer and thumbnails are. ``DOCMEMO_SCREENSHOT=PATH`` keeps the full-page
screenshot for a person to look at.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from chromium import BROWSER, NO_BROWSER, visit
from fake_vllm_server import FakeVLLM, Reply, Request
from PIL import Image
from screenshots import box_pixels, colour_pixels
from test_eval_compare import MODEL, llm, make_pdf, scripted

from llama_index_docmemo.evaluation.compare import Question, compare

pytestmark = pytest.mark.slow

PLANTED = "9,731"  # a figure no page holds, added to the stock engine's revenue answer
UNVERIFIED = (251, 211, 211)  # mark.unverified's background
PAGE_STATE = """JSON.stringify({
  cards: [...document.querySelectorAll('section.question')].map(s => ({
    id: s.id,
    answers: [...s.querySelectorAll('article.answer')].map(a => {
      const box = a.getBoundingClientRect();
      const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
      return {engine: a.dataset.engine, text: a.querySelector('.text')?.innerText ?? '',
              left: box.left, top: box.top, width: box.width,
              textRect: rect(a.querySelector('.text')),
              marks: [...a.querySelectorAll('.text mark')].map(m => [m.className, m.innerText]),
              citations: [...a.querySelectorAll('ol.citations li')].map(li => [li.className, li.innerText]),
              links: [...a.querySelectorAll('ol.citations a')].map(l => {
                const target = document.getElementById(l.getAttribute('href').slice(1));
                return {href: l.getAttribute('href'), inCard: !!target && a.contains(target),
                        img: target?.querySelector('img') ? rect(target.querySelector('img')) : null};
              })};
    }),
  })),
  images: [...document.images].map(i => ({src: i.getAttribute('src'), complete: i.complete,
                                          width: i.naturalWidth, shown: i.getBoundingClientRect().width})),
  heatmaps: document.querySelectorAll('table.heatmap').length,
})"""


def planted(request: Request) -> Reply:
    """The scripted server, the stock synthesizer's revenue answer with a figure on no page."""
    reply = scripted(request)
    if request.schema is None and reply.content.startswith("From the context: Revenue"):
        return Reply(f"{reply.content} It had {PLANTED} staff.")
    return reply


@pytest.mark.skipif(BROWSER is None, reason=NO_BROWSER)
def test_report_renders_answers_citations_and_boxes_offline(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    make_pdf(docs / "alpha.pdf", "alpha.pdf", 10)
    make_pdf(docs / "surveys" / "beta.pdf", "beta.pdf", 8)
    questions = [
        Question("rev", "What was the revenue of Alpha in 2023?", "41.5 million"),
        Question("survey", "How many adults did the Beta survey interview by cellphone?"),
    ]
    out = tmp_path / "out"
    with FakeVLLM([], default=planted, model=MODEL, require_schema=False) as server:
        compare(docs, questions, out, llm=llm(server), pages=6, progress=False)
    shown = visit((out / "report.html").as_uri(), tmp_path / "profile", PAGE_STATE)
    state, requested = shown.state, shown.requested
    assert requested and all(url.startswith(out.as_uri()) for url in requested), requested
    assert [c["id"] for c in state["cards"]] == ["q-rev", "q-survey"]
    for card in state["cards"]:
        docmemo, stock = card["answers"]
        assert (docmemo["engine"], stock["engine"]) == ("docmemo", "stock")
        assert docmemo["text"].strip() and stock["text"].strip()
        assert (
            docmemo["top"] == stock["top"] and docmemo["left"] + docmemo["width"] <= stock["left"]
        )
    assert "41.5 million" in state["cards"][0]["answers"][0]["text"]
    assert state["images"] and all(
        i["complete"] and i["width"] > 100 and i["shown"] > 100 for i in state["images"]
    ), state["images"]
    assert state["heatmaps"] == 2
    png = shown.png
    keep = os.environ.get("DOCMEMO_SCREENSHOT")
    if keep:
        Path(keep).write_bytes(png)
    with Image.open(io.BytesIO(png)) as image:
        image.load()
    for answer in state["cards"][0]["answers"]:  # "rev": both engines verified 41.5 million
        engine = answer["engine"]
        assert ["verified", "41.5 million"] in answer["marks"], answer
        verified = [text for css, text in answer["citations"] if css == "verified"]
        assert any(t.startswith("41.5 million") and "alpha.pdf p. 4" in t for t in verified)
        assert answer["links"] and all(link["inCard"] and link["img"] for link in answer["links"])
        drawn = sum(box_pixels(image, tuple(link["img"])) for link in answer["links"])
        assert drawn > 10, (engine, drawn)  # the cited boxes on the thumbnails, as shown
    stock = state["cards"][0]["answers"][1]
    assert ["unverified", PLANTED] in stock["marks"]
    assert [c for c in stock["citations"] if c[0] == "unverified" and PLANTED in c[1]]
    assert colour_pixels(image, [UNVERIFIED], tuple(stock["textRect"]), tolerance=12) > 20
    docmemo = state["cards"][0]["answers"][0]
    assert not [m for m in docmemo["marks"] if m[0] == "unverified"]
    assert colour_pixels(image, [UNVERIFIED], tuple(docmemo["textRect"]), tolerance=12) == 0
