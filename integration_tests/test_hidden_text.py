"""Text a reader cannot see never verifies a figure, never reaches a reader, never answers:
white on white, near the page's colour, under 4 pt, transparent, off the page, clipped away,
black on a black box, painted over. White text on a dark fill, and black text on a light one, stay
(they are seen)."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from llama_index_docmemo.cli import main
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.evaluation.setup import open_eval_store
from llama_index_docmemo.ingest.layout.pymupdf_detect import _clip_text
from llama_index_docmemo.ingest.pdf import read_pdf
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, Reader, ReaderInput
from llama_index_docmemo.types import EvidenceNote

VISIBLE = "Group revenue was 31,337 million in 2023, up from 29,870 million."


def _append(page: pymupdf.Page, operators: bytes) -> None:
    """Raw content-stream operators after the page's own (the font /helv is already there)."""
    xref = page.get_contents()[-1]
    doc = page.parent
    doc.update_stream(xref, doc.xref_stream(xref) + b"\n" + operators + b"\n")


HIDERS = {
    "white 3pt": lambda p: p.insert_text((72, 130), "4,242", fontsize=3, color=(1, 1, 1)),
    "white 12pt": lambda p: p.insert_text((72, 130), "4,242", fontsize=12, color=(1, 1, 1)),
    "near white": lambda p: p.insert_text((72, 130), "4,242", fontsize=11, color=(0.96,) * 3),
    "black 2pt": lambda p: p.insert_text((72, 130), "4,242", fontsize=2),
    "transparent": lambda p: p.insert_text((72, 130), "4,242", fontsize=12, fill_opacity=0),
    "off the page": lambda p: p.insert_text((72, -40), "4,242", fontsize=12),
    "black on black": lambda p: (
        p.draw_rect(pymupdf.Rect(70, 120, 200, 140), color=None, fill=(0, 0, 0)),
        p.insert_text((72, 135), "4,242", fontsize=11),
    ),
    "dark on its own colour": lambda p: (
        p.draw_rect(pymupdf.Rect(70, 120, 200, 140), color=None, fill=(0.1, 0.1, 0.4)),
        p.insert_text((72, 135), "4,242", fontsize=11, color=(0.1, 0.1, 0.4)),
    ),
    "painted over": lambda p: (
        p.insert_text((72, 135), "4,242", fontsize=11),
        p.draw_rect(pymupdf.Rect(70, 120, 200, 140), color=None, fill=(1, 1, 1)),
    ),
    "clipped away": lambda p: _append(
        p, b"q 0 0 5 5 re W n BT /helv 12 Tf 72 700 Td <342c323432> Tj ET Q"
    ),
}


def write(path: Path, hide) -> Path:  # noqa: ANN001
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 100), VISIBLE, fontsize=11)
    hide(page)
    page.draw_rect(pymupdf.Rect(70, 300, 260, 330), color=None, fill=(0.1, 0.1, 0.4))
    page.insert_text((76, 320), "Headcount 8,120", fontsize=12, color=(1, 1, 1))
    page.draw_rect(pymupdf.Rect(70, 400, 260, 430), color=None, fill=(0.85, 0.9, 1))
    page.insert_text((76, 420), "Offices 17", fontsize=11)
    doc.save(path)
    return path


@pytest.mark.parametrize("how", sorted(HIDERS))
def test_the_page_text_and_its_crops_hold_only_what_is_seen(tmp_path: Path, how: str) -> None:
    path = write(tmp_path / "r.pdf", HIDERS[how])
    with pymupdf.open(path) as doc:
        planted = "4,242" in doc[0].get_text("text")  # in the text layer MuPDF extracts
        assert planted is (how not in ("off the page", "clipped away"))
        crop = _clip_text(doc[0], (0, 0, 595, 842))
    text = read_pdf(path).pages[0].text
    assert "31,337" in text and "Headcount 8,120" in text  # white on a dark fill is seen
    assert "Offices 17" in text  # black on a light fill too
    assert "4,242" not in text and "4,242" not in crop


class ObedientReader(Reader):
    """Obeys what it is shown, and answers with the hidden figure."""

    name = "planted"

    def read(self, inp: ReaderInput) -> Feedback:
        page = inp.pages[0].ref
        return Feedback(
            answer="Revenue was 4,242 million.",
            useful_pages=[page],
            notes=[EvidenceNote(page=page, fact="4,242", quote="4,242")],
            status="answered",
        )


@pytest.mark.parametrize("how", ["white 3pt", "near white", "black 2pt", "black on black"])
def test_a_figure_stated_only_in_hidden_text_is_never_verified(tmp_path: Path, how: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "report.pdf", HIDERS[how])
    assert main(["index", str(docs), "--store", str(tmp_path / "store"), "--quiet"]) == 0
    store, encoder = open_eval_store(tmp_path / "store")
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=encoder,
        reader=ObedientReader(),
        config=DocMemoConfig(),
        evidence_images=False,
    )
    trace = engine.query("What was group revenue?").metadata["docmemo"]
    assert trace["citations"] and not any(c["verified"] for c in trace["citations"])
    assert "Unverified" in trace["answer"]
