"""Citations of an answer, verified by code: figures, names, quotes, crops, markers, abstention."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llama_index_docmemo.evidence.citations import (
    CropText,
    PageText,
    abstention_reason,
    answer_suffix,
    cite,
    not_found_text,
    with_markers,
)
from llama_index_docmemo.evidence.matching import (
    find_figures,
    find_names,
    locate_span,
    normalise,
    quote_span,
)
from llama_index_docmemo.types import EvidenceNote, PageRef

P3 = PageRef("report.pdf", 3)
P7 = PageRef("report.pdf", 7)
PAGE3 = "Results\nNet revenue was NOK 4,212.5 million in 2024.\nHeadcount rose to 1,184."
PAGE7 = "Outlook\nThe board of Acme Holdings expects a margin of 12.3 per cent."


def test_a_planted_figure_on_no_page_read_is_unverified_and_said() -> None:
    answer = "Revenue was NOK 4,212.5 million; the margin was 17.9%."
    citations = cite(answer, [PageText(P3, PAGE3), PageText(P7, PAGE7)], [], [P3])
    by_text = {c.text: c for c in citations}
    assert by_text["17.9%"].verified is False and by_text["17.9%"].how == "not_found"
    assert by_text["17.9%"].page is None and by_text["17.9%"].bbox is None
    found = by_text["4,212.5 million"]
    assert found.verified and (found.doc_id, found.page) == ("report.pdf", 3)
    assert found.quote == "Net revenue was NOK 4,212.5 million in 2024."
    assert PAGE3[found.start : found.end] == found.quote and found.stated == "4,212.5"
    assert (
        answer_suffix(citations) == " (Unverified: a figure of this answer is on no page read.)"
    )


def test_evidence_pages_are_searched_first_then_the_other_pages_read() -> None:
    both = "Revenue was 2024 revenue."
    other = PageText(P7, "In 2024 the plant opened.")
    evidence = PageText(P3, "Revenue 2024")
    assert cite(both, [other, evidence], [], [P3])[0].page == 3
    assert cite(both, [other, evidence], [], [])[0].page == 7  # no evidence: pages in order
    only_other = cite("Margin 12.3 percent", [PageText(P3, PAGE3), PageText(P7, PAGE7)], [], [P3])
    assert only_other[0].verified and only_other[0].page == 7


def test_the_readers_quote_is_preferred_and_checked_word_for_word() -> None:
    notes = [EvidenceNote(page=P3, fact="headcount 1,184", quote="Headcount rose to 1,184.")]
    citations = cite("1,184 people", [PageText(P3, PAGE3)], notes, [P3])
    assert citations[0].quote == "Headcount rose to 1,184." and len(citations) == 1
    paraphrase = [EvidenceNote(page=P3, fact="staff", quote="Headcount grew to 1,184.")]
    fact = cite("Staff grew.", [PageText(P3, PAGE3)], paraphrase, [P3])
    assert [(c.kind, c.verified, c.how) for c in fact] == [("fact", False, "not_found")]
    exact = [EvidenceNote(page=P3, fact="staff", quote="headcount  rose to 1,184")]
    assert cite("Staff grew.", [PageText(P3, PAGE3)], exact, [P3])[0].verified


def test_names_ocr_pages_and_crops() -> None:
    names = cite("It is Acme Holdings.", [PageText(P7, PAGE7, ocr=True)], [], [P7])
    assert [(c.text, c.kind, c.how) for c in names] == [("Acme Holdings", "name", "ocr_text")]
    crop = CropText((10.0, 20.0, 200.0, 120.0), "Segment  EBIT\nNordic  311.4")
    cited = cite("EBIT was 311.4", [PageText(P3, PAGE3, crops=(crop,))], [], [P3])
    assert cited[0].how == "crop_text" and cited[0].bbox == [10.0, 20.0, 200.0, 120.0]
    assert cited[0].box_from == "crop" and cited[0].verified


def test_claims_only_for_an_answer_the_reader_stands_by() -> None:
    notes = [EvidenceNote(page=P3, fact="revenue", quote="Net revenue was NOK 4,212.5 million")]
    drafted = cite("Not found in 5 pages.", [PageText(P3, PAGE3)], notes, [P3], claims=False)
    assert [c.kind for c in drafted] == ["fact"] and drafted[0].verified


def test_markers_follow_source_node_order_and_skip_the_unverified() -> None:
    answer = "Revenue 4,212.5 and margin 12.3 percent, or 99.9"
    pages = [PageText(P3, PAGE3), PageText(P7, PAGE7)]
    citations = cite(answer, pages, [], [P3, P7])
    marked = with_markers(answer, citations, [P7, P3, P7])  # a crop of p. 7 repeats its ref
    assert marked == "Revenue 4,212.5 [2] and margin 12.3 percent [1], or 99.9"
    notes = [EvidenceNote(page=P7, fact="outlook", quote="expects a margin")]
    facts = cite("Good outlook.", pages, notes, [P7])
    assert with_markers("Good outlook.", facts, [P3, P7]) == "Good outlook. [2]"


PAGE6 = "In 2023 the Group invested NOK 212.5 million in research and development."
PAGE19 = "Research and development spending reached NOK 248.3 million in 2024; 1,184 in the Nordic."


@pytest.mark.parametrize(
    ("answer", "claim", "computed"),
    [
        (
            "increased by 35.8 million, from 212.5 million (2023) to 248.3 million (2024)",
            "35.8 million",
            "difference: 248.3 million − 212.5 million",
        ),
        ("up 16.8%, from 212.5 million to 248.3 million", "16.8%", None),
        ("460.8 million in all: 212.5 million and 248.3 million", "460.8 million", None),
        ("248.3 million is 1.17 times 212.5 million", "1.17", "ratio: 248.3 million / 212.5 million"),
        ("from $212.5m to $0.2483 billion: up $35.8 million", "$35.8 million", None),
    ],
)
def test_a_figure_computed_from_cited_figures_says_so(
    answer: str, claim: str, computed: str | None
) -> None:
    citations = cite(answer, [PageText(P3, PAGE6), PageText(P7, PAGE19)], [], [P3, P7])
    target = next(c for c in citations if c.text == claim)
    assert target.verified and target.how == "computed" and target.page is None
    operation = target.computed.split(":")[0]
    assert operation in ("difference", "percent change", "sum", "ratio")
    if computed is not None:
        assert target.computed == computed
    note = f" (Computed: a figure of this answer is the {operation} of two cited figures.)"
    assert answer_suffix(citations) == note
    assert not any(ch.isdigit() for ch in note)  # answer checks read the answer as before


@pytest.mark.parametrize(
    "answer",
    [
        "increased by 35.9 million, from 212.5 million to 248.3 million",  # not the difference
        "increased by 35.8 million, from 212.5 million to 248.3 billion",  # not what p. 19 says
        "up 16.8% from 2023 to 2024",  # years are labels, not operands
    ],
)
def test_a_figure_no_arithmetic_of_cited_figures_gives_stays_unverified(answer: str) -> None:
    citations = cite(answer, [PageText(P3, PAGE6), PageText(P7, PAGE19)], [], [P3, P7])
    assert not any(c.how == "computed" for c in citations)
    assert answer_suffix(citations).startswith(" (Unverified: ")


def test_markers_skip_bare_years_beside_other_claims() -> None:
    answer = "increased by 35.8 million, from 212.5 million (2023) to 248.3 million (2024)"
    citations = cite(answer, [PageText(P3, PAGE6), PageText(P7, PAGE19)], [], [P3, P7])
    assert {c.text for c in citations if c.verified} >= {"(2023)", "(2024)"}
    assert with_markers(answer, citations, [P3, P7]) == (
        "increased by 35.8 million, from 212.5 million [1] (2023) to 248.3 million [2] (2024)"
    )
    alone = cite("In 2024.", [PageText(P7, PAGE19)], [], [P7])
    assert with_markers("In 2024.", alone, [P7]) == "In 2024 [1]."


def test_quote_rules_normalise_only_layout() -> None:
    text = "Total reve-\nnue  was \u201c4,200\u201d \u2014 up"
    span = quote_span('revenue was "4,200" - up', text)
    assert span == (6, len(text))
    assert quote_span("Total ... up", text) == (0, len(text))
    assert quote_span("up ... Total", text) is None  # pieces in order
    assert quote_span("revenue is 4,200", text) is None
    assert quote_span("x", text) is None
    assert normalise("A\n\nB").text == "a b"


def test_names_of_an_answer() -> None:
    text = "The CEO of Acme Holdings met John Smith and the Bank of America in March 2023."
    assert [n for n, _ in find_names(text)] == [
        "CEO of Acme Holdings",
        "John Smith",
        "Bank of America",
    ]
    assert find_names("Canada.") == [("Canada", (0, 6))]
    assert find_names("revenue rose in March May") == []


@given(st.integers(min_value=1000, max_value=10**9), st.integers(min_value=0, max_value=2))
def test_a_number_is_found_whatever_the_page_separators(value: int, decimals: int) -> None:
    number = value / 10**decimals
    written = f"{number:,.{decimals}f}"
    page = f"Total {number:.{decimals}f} units"
    figure = find_figures(f"The total was {written}.")[0]
    span = locate_span(figure, page)
    assert span is not None and page[span[0] : span[1]] == f"{number:.{decimals}f}"
    assert locate_span(figure, f"Total {number + 1:.{decimals}f} units") is None


BELIEFS = {P3: 0.8, P7: 0.4}


def test_abstention_rules() -> None:
    verified = cite("1,184", [PageText(P3, PAGE3)], [], [P3])
    planted = cite("17.9%", [PageText(P3, PAGE3)], [], [P3])
    assert abstention_reason("off", planted, [P3], BELIEFS, 0.9) is None
    assert abstention_reason("unverified", planted, [P3], BELIEFS, 0.9) is not None
    assert abstention_reason("unverified", verified, [P3], BELIEFS, 0.9) is None
    assert abstention_reason("low_belief", verified, [P3], BELIEFS, 0.7) is None
    assert "0.80" in (abstention_reason("low_belief", verified, [P3], BELIEFS, 0.9) or "")
    # no verified citation: the evidence pages' beliefs decide
    assert abstention_reason("low_belief", planted, [P7], BELIEFS, 0.5) is not None
    assert abstention_reason("low_belief", planted, [P3], BELIEFS, 0.5) is None
    assert abstention_reason("unverified_or_low_belief", planted, [P3], BELIEFS, 0.5)


@pytest.mark.parametrize("candidates", [[], [(P3, 0.8)]])
def test_not_found_text_names_the_candidates(candidates) -> None:
    text = not_found_text("weak", candidates)
    assert text.startswith("Not found") and ("report.pdf p. 3 (0.80)" in text) == bool(candidates)


WORDS = st.lists(st.from_regex(r"[A-Za-z0-9,.%$]{1,8}", fullmatch=True), min_size=2, max_size=30)


@given(WORDS, st.data())
def test_any_run_of_the_pages_words_is_found_whatever_its_layout(words, data) -> None:
    gaps = data.draw(st.lists(st.sampled_from([" ", "\n", "  ", " \n "]), min_size=len(words)))
    page = "".join(w + g for w, g in zip(words, gaps, strict=False)).strip()
    start = data.draw(st.integers(0, len(words) - 2))
    end = data.draw(st.integers(start + 2, len(words)))
    quote = " ".join(words[start:end]).upper()
    span = quote_span(quote, page)
    assert span is not None
    assert normalise(page[span[0] : span[1]]).text == normalise(quote).text
