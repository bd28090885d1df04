"""Acceptance: with LlamaIndex's ``OpenAI("gpt-4o")`` at its defaults, a reader request of five
pages and three crops is at most 1 MB on the wire and no image exceeds what OpenAI's high detail
uses (2048 px long side, 768 px short side), on a generated filing and, when ``DOCMEMO_DATA``
names the dev sets, on a real 10-K. The body is the one a local HTTP server received."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pymupdf
import pytest
from llama_index.llms.openai import OpenAI

from integration_tests.fake_vllm_server import FakeVLLM, Reply
from llama_index_docmemo.ingest.page_images import PageImage
from llama_index_docmemo.llms.image_budget import image_tokens
from llama_index_docmemo.postprocessors.crops import render_crop
from llama_index_docmemo.reasoning.base import CropView, PageView, ReasoningInput
from llama_index_docmemo.reasoning.vlm import VLMReasoner
from llama_index_docmemo.types import PageRef

MAX_BODY = 1_000_000
REPLY = json.dumps(
    {
        "notes": [],
        "useful_pages": [1],
        "irrelevant_pages": [],
        "missing": [],
        "status": "answered",
        "answer": "$5.2M",
        "refined_query": None,
    }
)


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


def reading(pdf: Path, cache: Path) -> ReasoningInput:
    """Pages 2-6 as the engine shows them (rendered once into the cache) and three table crops
    rendered as the crop postprocessor renders them."""
    version = pdf.stem
    pages = [
        PageView(
            ref=PageRef(pdf.name, p),
            text="",
            image=PageImage(str(pdf), version, p, 1500, cache),
        )
        for p in range(2, 7)
    ]
    crops = []
    with pymupdf.open(pdf) as doc:
        for p in range(2, 5):
            rect = doc[p - 1].rect
            box = (36.0, rect.height * 0.4, rect.width - 36.0, rect.height * 0.7)
            path = cache / f"crop-{p}.png"
            assert render_crop(doc[p - 1], box, path, 1500, 200)
            crops.append(CropView(PageRef(pdf.name, p), "table", box, load_image=lambda x=path: x))
    return ReasoningInput(question="What was revenue?", query="", pages=pages, crops=crops)


def dev_filing() -> Path | None:
    data = os.environ.get("DOCMEMO_DATA")
    found = sorted(Path(data, "financebench", "pdfs").glob("*.pdf")) if data else []
    return found[0] if found else None


@pytest.mark.parametrize("source", ["generated", "dev"])
def test_a_gpt4o_reader_request_is_small_and_within_high_detail(source, tmp_path) -> None:
    if source == "generated":
        pdf = filing(tmp_path / "10k.pdf")
    else:
        pdf = dev_filing()
        if pdf is None:
            pytest.skip("DOCMEMO_DATA does not name the dev sets (financebench/pdfs)")
    with FakeVLLM([], default=Reply(REPLY), model="gpt-4o", flavour="openai") as server:
        llm = OpenAI(model="gpt-4o", api_base=server.url, api_key="sk-test", max_retries=0)
        feedback = VLMReasoner(llm).reason(reading(pdf, tmp_path))
    assert server.problems == [] and feedback.answer == "$5.2M"
    (request,) = server.requests
    assert len(request.image_sizes) == 8 and set(request.image_formats) == {"JPEG"}
    assert request.body_bytes <= MAX_BODY, request.body_bytes
    for width, height in request.image_sizes:
        assert max(width, height) <= 2048 and min(width, height) <= 768, (width, height)
    pages, crops = request.image_sizes[:5], request.image_sizes[5:]
    assert all(min(size) == 768 for size in pages)  # as many pixels as high detail uses
    page_cost = image_tokens("openai", *pages[0])
    assert all(image_tokens("openai", *size) <= page_cost for size in crops)
