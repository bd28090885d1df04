"""The generated demo report: reproducible, outlined, with real tables and answerable questions."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest

from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.offline import OfflineReader
from llama_index_docmemo.types import PageRef


@pytest.fixture(scope="module")
def demo_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_pdf(tmp_path_factory.mktemp("demo") / "nested" / "report.pdf")


@pytest.fixture(scope="module")
def texts(demo_pdf: Path) -> list[str]:
    with pymupdf.open(demo_pdf) as doc:
        return [p.get_text() for p in doc]


def test_two_writes_give_the_same_bytes(demo_pdf: Path, tmp_path: Path) -> None:
    again = write_demo_pdf(tmp_path / "again.pdf")
    assert again.read_bytes() == demo_pdf.read_bytes()


def test_has_about_two_dozen_pages_and_an_outline(demo_pdf: Path, texts: list[str]) -> None:
    assert 20 <= len(texts) <= 30
    with pymupdf.open(demo_pdf) as doc:
        toc = doc.get_toc()
    titles = {title: page for _, title, page in toc}
    assert titles["Looking back: 2023 in review"] == 6
    assert titles["Note 7 Research and development"] == 19
    assert any(level == 2 for level, _, _ in toc)
    assert all(1 <= page <= len(texts) for _, _, page in toc)


def test_tables_are_found_by_pymupdf(demo_pdf: Path) -> None:
    with pymupdf.open(demo_pdf) as doc:
        pages = {n: doc[n - 1] for n in (4, 11, 19)}
        found = {n: page.find_tables().tables for n, page in pages.items()}
        markdown = found[11][0].to_markdown()
        assert all(found.values()), {n: len(t) for n, t in found.items()}
        assert "|Nordic|1,184|1,102|" in markdown


def test_has_a_vector_bar_chart_with_caption(demo_pdf: Path, texts: list[str]) -> None:
    with pymupdf.open(demo_pdf) as doc:
        fills = [d for d in doc[7].get_drawings() if d.get("fill") and d["rect"].height > 20]
    assert len(fills) >= 5
    assert "Figure 1: Revenue by year" in texts[7]


def test_evidence_pages_hold_the_answers_parts(texts: list[str]) -> None:
    rd, nordic, plant = DEMO_QUESTIONS
    assert "NOK 212.5 million in research and development" in texts[5]
    assert "2024 amounted to NOK 248.3 million" in " ".join(texts[18].split())
    assert all("212.5" not in t for i, t in enumerate(texts) if i != 5)
    assert all("248.3" not in t for i, t in enumerate(texts) if i != 18)
    first, second = rd.evidence_pages
    assert (first, second) == (6, 19) and second - first > 1  # not adjacent
    assert nordic.answer in texts[nordic.evidence_pages[0] - 1]
    assert plant.answer in texts[plant.evidence_pages[0] - 1]


def test_distractor_pages_share_the_questions_words(texts: list[str]) -> None:
    for q in DEMO_QUESTIONS:
        words = [w for w in re.findall(r"[a-z]{6,}", q.question.lower())]
        sharing = [
            i + 1
            for i, t in enumerate(texts)
            if i + 1 not in q.evidence_pages and any(w in t.lower() for w in words)
        ]
        assert len(sharing) >= 3, (q.question, sharing)


@pytest.mark.parametrize("question", DEMO_QUESTIONS, ids=lambda q: q.question[:30])
def test_offline_reader_answers_from_the_evidence_pages(question, texts: list[str]) -> None:
    pages = [PageView(PageRef("demo", n), texts[n - 1]) for n in question.evidence_pages]
    fb = OfflineReader().read(
        ReaderInput(question.question, question.question, pages, pages_in_scope=len(texts))
    )
    assert fb.status == "answered"
    assert fb.answer is not None
    for part in re.findall(r"\d[\d,.]*", question.answer):
        assert part in fb.answer


def test_cross_page_question_needs_both_pages(texts: list[str]) -> None:
    question = DEMO_QUESTIONS[0].question
    for n in (6, 19):
        fb = OfflineReader().read(
            ReaderInput(question, question, [PageView(PageRef("demo", n), texts[n - 1])])
        )
        assert fb.status == "need_more"
        assert fb.useful_pages == [PageRef("demo", n)]
        assert ("2024" if n == 6 else "2023") in (fb.refined_query or "")
