"""Acceptance: with LlamaIndex's ``OpenAI("gpt-4o")`` at its defaults, a reader request of five
pages and three crops is at most 1 MB on the wire and no image exceeds what OpenAI's high detail
uses (2048 px long side, 768 px short side), on a generated filing and a generated dense
two-column paper (over 1 MB without the byte budget) and, when ``DOCMEMO_DATA`` names the dev
sets, on a real 10-K and the densest dev paper. The body is the one a local HTTP server received;
the trace's image-token estimate is that of the images it carried."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pymupdf
import pytest
from llama_index.llms.openai import OpenAI

from integration_tests.fake_vllm_server import FakeVLLM, Reply, Request
from integration_tests.scripted_replies import reader_reply
from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.llms.image_policy import DEFAULT_MAX_IMAGE_BYTES, image_tokens
from llama_index_docmemo.page_images import PageImage
from llama_index_docmemo.postprocessors.crops import render_crop
from llama_index_docmemo.readers.base import CropView, PageView, ReaderInput
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.types import PageRef

MAX_BODY = 1_000_000
REPLY = reader_reply(notes=[])


def filing(path: Path, pages: int = 6) -> Path:
    """A filing-like PDF: dense 9-pt prose above and below a ruled table of figures."""
    rng = random.Random(7)
    words = "revenue operating income segment fiscal net sales margin deferred tax".split()
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=612, height=792)
        prose = " ".join(rng.choice(words) for _ in range(900))
        page.insert_textbox(pymupdf.Rect(54, 54, 558, 300), prose, fontsize=9)
        for row in range(12):
            y = 320 + row * 18
            page.draw_line((54, y), (558, y))
            cells = [f"Item {number}.{row}"] + [f"{rng.randint(100, 99999):,}" for _ in range(4)]
            for col, cell in enumerate(cells):
                page.insert_text((60 + col * 100, y + 13), cell, fontsize=9)
        page.insert_textbox(pymupdf.Rect(54, 550, 558, 740), prose, fontsize=9)
    doc.save(path)
    return path


def paper(path: Path, pages: int = 6) -> Path:
    """A dense two-column paper: 7.5-pt lines of varied words in both columns above and below a
    colour bar chart with a line plot (what JPEG squeezes least: a page costs ~170 KB)."""
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(2, 11))) for _ in range(3000)]

    def line() -> str:
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < 60:
            words.append(rng.choice(vocabulary))
        return " ".join(words)

    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page(width=612, height=792)
        for x in (54, 318):
            for y in [*range(62, 400, 9), *range(568, 740, 9)]:
                page.insert_text((x, y), line(), fontsize=7.5)
        for bar in range(24):
            height, colour = rng.uniform(20, 130), (rng.random(), rng.random(), rng.random())
            x = 60 + bar * 20
            page.draw_rect(pymupdf.Rect(x, 545 - height, x + 14, 545), color=colour, fill=colour)
            page.insert_text((x, 555), f"{rng.randint(10, 99)}.{rng.randint(0, 9)}", fontsize=5)
        plot = [(60 + i * 10, 420 + rng.uniform(0, 40)) for i in range(48)]
        page.draw_polyline(plot, color=(0.8, 0.1, 0.1), width=0.8)
    doc.save(path)
    return path


def reading(pdf: Path, cache: Path, text: bool = False) -> ReaderInput:
    """Pages 2-6 as the engine shows them (rendered once into the cache; with ``text``, with
    their text layer) and three table crops rendered as the crop postprocessor renders them."""
    version = pdf.stem
    crops = []
    with pymupdf.open(pdf) as doc:
        pages = [
            PageView(
                ref=PageRef(pdf.name, p),
                text=doc[p - 1].get_text() if text else "",
                image=PageImage(str(pdf), version, p, 1500, cache),
            )
            for p in range(2, 7)
        ]
        for p in range(2, 5):
            rect = doc[p - 1].rect
            box = (36.0, rect.height * 0.4, rect.width - 36.0, rect.height * 0.7)
            path = cache / f"crop-{p}.png"
            assert render_crop(doc[p - 1], box, path, 1500, 200)
            crops.append(CropView(PageRef(pdf.name, p), "table", box, load_image=lambda x=path: x))
    return ReaderInput(question="What was revenue?", query="", pages=pages, crops=crops)


def dev_pdf(name: str, file: str | None = None) -> Path | None:
    """``file`` of a dev set (its first PDF without one), None without ``DOCMEMO_DATA``."""
    data = os.environ.get("DOCMEMO_DATA")
    found = sorted(Path(data, name, "pdfs").glob(file or "*.pdf")) if data else []
    return found[0] if found else None


DENSEST = "2023.findings-emnlp.248.pdf"  # 1.72 MB a request at full resolution, no budget


def source_pdf(source: str, tmp_path: Path) -> Path:
    pdf = {
        "filing": lambda: filing(tmp_path / "10k.pdf"),
        "paper": lambda: paper(tmp_path / "paper.pdf"),
        "dev-10k": lambda: dev_pdf("financebench"),
        "dev-paper": lambda: dev_pdf("mmlongbench-doc", DENSEST),
    }[source]()
    if pdf is None:
        pytest.skip(f"DOCMEMO_DATA does not name the dev sets ({source})")
    return pdf


def read_once(inp: ReaderInput, **reader: object) -> tuple[Request, int]:
    """The one request a gpt-4o reader sent for ``inp`` and the trace's image-token estimate."""
    with FakeVLLM([], default=Reply(REPLY), model="gpt-4o", flavour="openai") as server:
        llm = OpenAI(model="gpt-4o", api_base=server.url, api_key="sk-test", max_retries=0)
        with counting_llm_calls() as tally:
            feedback = VLMReader(llm, **reader).read(inp)  # type: ignore[arg-type]
    assert server.problems == [] and feedback.answer == "$5.2M"
    (request,) = server.requests
    return request, tally.image_tokens


def image_bytes(request: Request) -> int:
    """Base64 bytes of the request's images, as the body carries them."""
    parts = [part for m in request.body["messages"] for part in m["content"] or []]
    urls = [p["image_url"]["url"] for p in parts if isinstance(p, dict) and "image_url" in p]
    return sum(len(url.split(",", 1)[1]) for url in urls)


@pytest.mark.parametrize("text", [False, True], ids=["images", "images+text"])
@pytest.mark.parametrize("source", ["filing", "paper", "dev-10k", "dev-paper"])
def test_a_gpt4o_reader_request_is_small_and_within_high_detail(source, text, tmp_path) -> None:
    pdf = source_pdf(source, tmp_path)
    request, estimate = read_once(reading(pdf, tmp_path, text))
    crops_only = 5 if text else 8  # with their text, pages whose table is cropped go as text
    assert len(request.image_sizes) in range(crops_only, 9), request.image_sizes
    assert set(request.image_formats) == {"JPEG"}
    assert request.body_bytes <= MAX_BODY, request.body_bytes
    for width, height in request.image_sizes:
        assert max(width, height) <= 2048 and min(width, height) <= 768, (width, height)
    # the estimate in the trace is that of what was sent, shrunk or not
    assert estimate == sum(image_tokens("openai", *size) for size in request.image_sizes)
    unbudgeted, _ = read_once(reading(pdf, tmp_path, text), max_image_bytes=None)
    pages, crops = unbudgeted.image_sizes[:5], unbudgeted.image_sizes[5:]
    if not text:
        assert all(min(size) == 768 for size in pages)  # as many pixels as high detail uses
        page_cost = image_tokens("openai", *pages[0])
        assert all(image_tokens("openai", *size) <= page_cost for size in crops)
    if image_bytes(unbudgeted) <= DEFAULT_MAX_IMAGE_BYTES:  # it fitted: nothing was shrunk
        assert request.image_sizes == unbudgeted.image_sizes
        assert image_bytes(request) == image_bytes(unbudgeted)
    else:
        assert image_bytes(request) <= DEFAULT_MAX_IMAGE_BYTES < image_bytes(unbudgeted)


def test_the_dense_paper_is_over_1_mb_without_the_byte_budget(tmp_path) -> None:
    """The generated paper reproduces the dev papers' case: the budget is what brings it down."""
    unbudgeted, _ = read_once(
        reading(paper(tmp_path / "paper.pdf"), tmp_path), max_image_bytes=None
    )
    assert unbudgeted.body_bytes > MAX_BODY
