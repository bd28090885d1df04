"""Schema building: sections from outline or headings, page -> section paths, summaries, type, title."""

from __future__ import annotations

from pathlib import Path

from llama_index_docmemo.ingest.parsed import ParsedDocument, ParsedPage, TextLine, TocEntry
from llama_index_docmemo.ingest.pdf import read_pdf
from llama_index_docmemo.ingest.structure import (
    boilerplate_lines,
    build_schema,
    detect_headings,
    first_lines_summary,
    guess_doc_type,
    guess_title,
    page_section_paths,
    sections_from_entries,
)
from tests.ingest_samples import make_report


def _doc(texts: list[str], **kwargs: object) -> ParsedDocument:
    pages = [ParsedPage(page=i + 1, text=t, width=595, height=842) for i, t in enumerate(texts)]
    fields: dict = {"doc_id": "d.pdf", "doc_version": "v", "source": "d.pdf", "n_pages": len(pages)}
    fields.update(kwargs)
    return ParsedDocument(pages=pages, **fields)


def test_sections_end_where_the_next_of_their_level_or_above_begins() -> None:
    entries = [TocEntry(1, "Part I", 1), TocEntry(2, "Item 1", 2), TocEntry(2, "Item 2", 5)]
    entries.append(TocEntry(1, "Part II", 8))
    spans = [(s.title, s.start_page, s.end_page) for s in sections_from_entries(entries, 10)]
    assert spans == [("Part I", 1, 7), ("Item 1", 2, 4), ("Item 2", 5, 7), ("Part II", 8, 10)]


def test_sections_starting_on_one_page_do_not_end_before_they_start() -> None:
    sections = sections_from_entries([TocEntry(1, "A", 3), TocEntry(1, "B", 3)], 4)
    assert [(s.start_page, s.end_page) for s in sections] == [(3, 3), (3, 4)]


def test_page_paths_nest_and_pages_before_any_section_have_none() -> None:
    entries = [TocEntry(1, "Part I", 2), TocEntry(2, "Item 1", 2), TocEntry(2, "Item 2", 4)]
    entries.append(TocEntry(1, "Part II", 5))
    paths = page_section_paths(sections_from_entries(entries, 6), 6)
    assert 1 not in paths
    assert paths[3] == "Part I > Item 1"
    assert paths[4] == "Part I > Item 2"
    assert paths[6] == "Part II"


def test_siblings_on_one_page_are_not_nested() -> None:
    entries = [TocEntry(1, "A", 1), TocEntry(1, "B", 1)]
    assert page_section_paths(sections_from_entries(entries, 2), 2) == {1: "B", 2: "B"}


def _lines(page: int, *items: tuple[str, float, bool]) -> list[TextLine]:
    return [TextLine(page=page, text=t, size=s, bold=b) for t, s, b in items]


BODY = ("Plain body text that runs for a good number of characters here.", 10.0, False)


def test_headings_ranked_by_size_with_title_and_noise_left_out() -> None:
    lines = [
        *_lines(1, ("The Big Title", 28, True), BODY, BODY),
        *_lines(2, ("1 Introduction", 18, True), BODY, ("Figure 1: a chart", 12, True), BODY),
        *_lines(3, ("1.1 Scope", 14, False), BODY, ("and so it continues", 14, False)),
        *_lines(4, ("Key terms", 10, True), BODY, ("2 Method", 18, True), BODY),
    ]
    entries = detect_headings(lines, 4)
    assert [(e.level, e.title, e.page) for e in entries] == [
        (1, "1 Introduction", 2),
        (2, "1.1 Scope", 3),
        (3, "Key terms", 4),
        (1, "2 Method", 4),
    ]


def test_wrapped_heading_lines_are_joined_and_boilerplate_skipped() -> None:
    lines = [
        *_lines(1, ("Cover", 16, True), BODY),
        *_lines(2, BODY, ("Results of the", 16, True), ("long study", 16, True), BODY),
        *_lines(3, ("ACME CONFIDENTIAL", 16, True), BODY),
    ]
    entries = detect_headings(lines, 3, boilerplate={"acme confidential"})
    assert [e.title for e in entries] == ["Cover", "Results of the long study"]


def test_too_many_headings_keep_only_the_top_levels() -> None:
    lines = [
        line
        for page in range(1, 4)
        for line in _lines(
            page,
            (f"Chapter {page}", 20, True),
            *((f"Bullet {i}", 14, False) for i in range(6)),
            BODY,
        )
    ]
    assert [e.title for e in detect_headings(lines, 3)] == ["Chapter 1", "Chapter 2", "Chapter 3"]


def test_no_lines_no_headings() -> None:
    assert detect_headings([], 3) == []


def test_boilerplate_and_first_line_summaries() -> None:
    topics = ["Sales", "Costs", "Staff", "Plans"]
    texts = [
        f"ACME Corp report\n{t} heading\nBody about {t.lower()}\n{i}" for i, t in enumerate(topics)
    ]
    boiler = boilerplate_lines(texts)
    assert boiler == {"acme corp report", "#"}
    assert first_lines_summary(texts[1], boiler) == "Costs heading | Body about costs"
    long = "\n".join(f"Sentence number {i} with several words in it" for i in range(30))
    summary = first_lines_summary(long, max_chars=100)
    assert len(summary) <= 100 and summary.startswith("Sentence number 0")


def test_doc_type_cues() -> None:
    assert guess_doc_type(_doc(["UNITED STATES SEC\nFORM 10-K\nAnnual report"]), "") == "10-K"
    paper = _doc(["A Study\nAbstract\nWe show...\n1 Introduction\nText"])
    assert guess_doc_type(paper, "A Study") == "paper"
    slides = _doc(["Growth plan", "Market share 40%"])
    for page in slides.pages:
        page.width, page.height = 720, 540
    assert guess_doc_type(slides, "") == "slides"
    assert guess_doc_type(_doc(["Coffee machine\nUser Manual\nSafety first"]), "") == "manual"
    assert guess_doc_type(_doc(["Some memo text"]), "") == "document"


def test_title_prefers_a_real_metadata_title() -> None:
    lines = [TextLine(1, "Big Cover Title", 30), TextLine(1, "small print", 8)]
    assert guess_title(_doc(["x"], title_hint="Real Title", lines=lines)) == "Real Title"
    assert (
        guess_title(_doc(["x"], title_hint="report_final.docx", lines=lines)) == "Big Cover Title"
    )
    assert guess_title(_doc(["First line of text\nsecond"], title_hint="0001018724-18")) == (
        "First line of text"
    )
    assert guess_title(_doc([""])) == "d"


def test_build_schema_from_generated_pdf_headings(tmp_path: Path) -> None:
    schema = build_schema(read_pdf(make_report(tmp_path / "r.pdf")), tenant="t1", acl=["g"])
    assert schema.title == "Annual Widget Report"
    assert schema.n_pages == 5 and schema.tenant == "t1" and schema.acl == ["g"]
    assert [s.title for s in schema.sections] == [
        "1 Introduction",
        "1.1 Background",
        "2 Results",
        "2.1 Regional split",
    ]
    assert schema.section_of(3) == "1 Introduction > 1.1 Background"
    assert schema.section_of(4) == "2 Results"
    assert schema.summary_of(2).startswith("1 Introduction | On scope: The quarterly revenue")
    assert "confidential" not in schema.summary_of(2).lower()
    assert schema.summaries_by == "first-lines"


def test_outline_wins_over_detected_headings(tmp_path: Path) -> None:
    schema = build_schema(read_pdf(make_report(tmp_path / "t.pdf", toc=True)))
    assert [s.title for s in schema.sections] == [
        "Introduction",
        "Background",
        "Results",
        "Regional",
    ]
    assert schema.section_of(5) == "Results > Regional"
