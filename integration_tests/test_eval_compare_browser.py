"""``report.html`` in a real browser: headless Chromium (Debian's ``chromium``) opens it offline,
and both engines' answers render side by side, each with its citations linked to thumbnails of
their pages with the cited boxes drawn, and a figure planted in the stock answer shown unverified.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages
ended by NUL on file descriptors 3 and 4), so nothing beyond the browser is needed. Every request
the page makes is recorded: all must be files beside the report. The screenshot is read where the
page says each card's answer and thumbnails are. ``DOCMEMO_SCREENSHOT=PATH`` keeps the full-page
screenshot for a person to look at.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fake_vllm_server import FakeVLLM, Reply, Request
from PIL import Image
from screenshots import box_pixels, colour_pixels
from test_eval_compare import MODEL, llm, make_pdf, scripted

from llama_index_docmemo.evaluation.compare import Question, compare

pytestmark = pytest.mark.slow

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
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


class DevTools:
    """A headless Chromium and its DevTools pipe: send commands, collect events."""

    def __init__(self, profile: Path) -> None:
        assert BROWSER is not None
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def pipes() -> None:  # the browser reads commands on fd 3 and writes replies on fd 4
            commands = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4
            replies = fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [
                BROWSER,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--window-size=1400,1000",
                "--host-resolver-rules=MAP * ~NOTFOUND",
            ],
            preexec_fn=pipes,
            close_fds=False,  # subprocess would close fds 3 and 4 after preexec_fn
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._message(deadline))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):  # already gone
            self.send("Browser.close")
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)
        os.close(self._read)
        os.close(self._write)


def planted(request: Request) -> Reply:
    """The scripted server, the stock synthesizer's revenue answer with a figure on no page."""
    reply = scripted(request)
    if request.schema is None and reply.content.startswith("From the context: Revenue"):
        return Reply(f"{reply.content} It had {PLANTED} staff.")
    return reply


@pytest.mark.skipif(BROWSER is None, reason="no chromium (Debian: apt-get install chromium)")
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
    browser = DevTools(tmp_path / "profile")
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        browser.send("Network.enable", session)
        browser.send("Page.enable", session)
        browser.send("Page.navigate", session, url=(out / "report.html").as_uri())
        browser.wait_for("Page.loadEventFired")
        height = browser.send("Page.getLayoutMetrics", session)["cssContentSize"]["height"]
        browser.send(  # the whole page in the viewport: the rects below are the screenshot's
            "Emulation.setDeviceMetricsOverride",
            session,
            width=1400,
            height=int(height) + 1,
            deviceScaleFactor=1,
            mobile=False,
        )
        state = json.loads(
            browser.send("Runtime.evaluate", session, expression=PAGE_STATE, returnByValue=True)[
                "result"
            ]["value"]
        )
        shot = browser.send("Page.captureScreenshot", session, format="png")
    finally:
        browser.close()
    requested = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent"
    ]
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
    png = base64.b64decode(shot["data"])
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
