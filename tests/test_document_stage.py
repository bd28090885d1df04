"""The document stage (pure): which document a question names, by its cards and its pages."""

from __future__ import annotations

import pytest

from llama_index_docmemo.levers.document_stage import (
    card_fields,
    card_lead,
    card_scores,
    document_scores,
    make_card,
    naming_groups,
    page_scores,
)
from llama_index_docmemo.memory.schema import DocumentSchema, Section
from llama_index_docmemo.text import keys

COVER = (
    "UNITED STATES SECURITIES AND EXCHANGE COMMISSION FORM {form} For the fiscal year ended "
    "December 31, {year} {company} (Exact name of registrant as specified in its charter)"
)


def _card(doc_id: str, company: str, year: int, form: str = "10-K", title: str = ""):  # noqa: ANN202
    schema = DocumentSchema(doc_id=doc_id, doc_version="v1", n_pages=100, title=title)
    return make_card(
        doc_id, *card_fields(schema, COVER.format(form=form, year=year, company=company))
    )


FILINGS = [
    ("3M_2018_10K.pdf", "3M COMPANY", 2018),
    ("3M_2022_10K.pdf", "3M COMPANY", 2022),
    ("PEPSICO_2021_10K.pdf", "PepsiCo, Inc.", 2021),
    ("PEPSICO_2022_10K.pdf", "PepsiCo, Inc.", 2022),
    ("AMAZON_2017_10K.pdf", "AMAZON.COM, INC.", 2017),
]


def _best(question: str, cards) -> str:  # noqa: ANN001
    scores = card_scores(question, cards)
    return max(scores, key=lambda d: (scores[d], d))


def test_naming_words_are_names_years_and_forms_not_what_is_asked() -> None:
    words = set().union(
        *naming_groups(
            "Assume that you are an analyst. What is the FY2018 capital expenditure for 3M "
            "in its 10-K? Answer in USD millions."
        )
    )
    assert set(keys("2018")) <= words and "w:3m" in words and "w:fy2018" in words
    assert set(keys("Annual")) <= words and set(keys("USD")) <= words
    for asked in ("Assume", "analyst", "What", "capital", "expenditure", "Answer", "millions"):
        assert not set(keys(asked)) & words, asked


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        (
            "What is the FY2018 capital expenditure amount (in USD millions) for 3M?",
            "3M_2018_10K.pdf",
        ),
        ("What was PepsiCo's FY2021 capital expenditure?", "PEPSICO_2021_10K.pdf"),
        ("What is Amazon's change in revenue from FY2016 to FY2017?", "AMAZON_2017_10K.pdf"),
    ],
)
def test_the_named_filing_scores_best(question: str, gold: str) -> None:
    cards = [_card(*filing) for filing in FILINGS]
    assert _best(question, cards) == gold


def test_a_naming_word_counts_once_whatever_forms_a_card_spells_it_in() -> None:
    amazon = _card("AMAZON_2017_10K.pdf", "AMAZON.COM, INC.", 2017)
    schema = DocumentSchema(doc_id="ADOBE_2016_10K.pdf", doc_version="v1", n_pages=90)
    first_page = "Adobe Inc. annual report: FY2016 results against FY2017 guidance, fiscal 2016"
    other = make_card(schema.doc_id, *card_fields(schema, first_page))
    question = "What is Amazon's change in revenue from FY2016 to FY2017?"
    assert _best(question, [amazon, other]) == "AMAZON_2017_10K.pdf"


def test_hash_named_files_are_found_by_their_first_page_and_title() -> None:
    cards = [
        _card(f"{i:040x}.pdf", company, year, title=f"10-K {year} {company}")
        for i, (_, company, year) in enumerate(FILINGS)
    ]
    best = _best("What was PepsiCo's FY2021 capital expenditure?", cards)
    assert best == f"{2:040x}.pdf"


def test_a_form_type_tells_a_quarterly_report_from_an_annual_one() -> None:
    cards = [
        _card("PFIZER_2021_10K.pdf", "Pfizer Inc.", 2021),
        _card("Pfizer_2023Q2_10Q.pdf", "Pfizer Inc.", 2023, form="10-Q"),
    ]
    assert _best("Which companies did Pfizer acquire, per its 10K report?", cards) == (
        "PFIZER_2021_10K.pdf"
    )
    assert _best("What was Pfizer's revenue in Q2 of FY2023?", cards) == "Pfizer_2023Q2_10Q.pdf"


def test_a_number_or_the_letters_of_a_word_with_digits_name_no_document() -> None:
    """ "90 minutes" measures, it does not name; "3M" and "FY2018" name by the word whole (or
    its year), never by a "3" or an "FY" that any report prints."""
    slides = make_card("slides.pdf", "Germanwings 9525 crisis", "Lufthansa digital response")
    report = make_card(
        "report.pdf", "ADOBE 2015 10K", "FY 2017 revenue 3 segments, 90 and 120 days"
    )
    for question in (
        "What colors are the logo within the first 90 minutes and afterward until 120 minutes?",
        "What is the FY2018 capital expenditure for 3M?",
    ):
        assert card_scores(question, [slides, report])["report.pdf"] == 0.0, question
    assert not set().union(*naming_groups("What share of the 90 minutes, 3.5 or 12?"))
    three_m = make_card("a.pdf", "3M Company", "annual report 2018")
    assert _best("What is the FY2018 capital expenditure for 3M?", [three_m, report]) == "a.pdf"


def test_a_word_on_every_card_decides_nothing() -> None:
    cards = [_card(*filing) for filing in FILINGS]
    assert set(
        card_scores("What does the SECURITIES AND EXCHANGE COMMISSION say?", cards).values()
    ) == {0.0}
    assert card_scores("no names here", []) == {}


def test_the_card_holds_the_name_title_metadata_outline_and_first_page() -> None:
    schema = DocumentSchema(
        doc_id="reports/ACME_2023Q2_10Q.pdf",
        doc_version="v1",
        n_pages=3,
        title="Acme quarterly",
        sections=[Section(title="Segment results", start_page=2, end_page=3)],
        page_summaries={1: "cover summary"},
    )
    head, body = card_fields(schema, "first page words", {"region": "Nordic", "year": 2023})
    assert "ACME 2023 Q2" in head and "Acme quarterly" in head and "Nordic" in head
    assert "Quarterly" in head  # the form type as a word
    assert "Segment results" in body and "cover summary" in body and "first page words" in body


def test_document_scores_fuse_pages_and_cards_best_at_one() -> None:
    pages = page_scores([("a.pdf", 0.5), ("a.pdf", 1.0), ("b.pdf", 0.8)])
    assert pages == {"a.pdf": 1.0, "b.pdf": 0.8}
    fused = document_scores(pages, {"b.pdf": 1.0, "c.pdf": 0.5}, card_weight=0.5)
    assert fused == pytest.approx({"a.pdf": 0.5 / 0.9, "b.pdf": 1.0, "c.pdf": 0.25 / 0.9})
    assert document_scores({}, {}, 0.5) == {}
    with pytest.raises(ValueError, match="card_weight"):
        document_scores(pages, {}, 1.5)


def test_the_card_lead_is_the_drop_after_the_named_documents() -> None:
    assert card_lead({"a": 1.0, "b": 0.3, "c": 0.2}) == pytest.approx(0.7)
    siblings = {"pepsi_2021": 1.0, "pepsi_2022": 1.0, "other": 0.25}  # a company's two filings
    assert card_lead(siblings) == 0.0
    assert card_lead(siblings, documents=2) == pytest.approx(0.75)
    assert card_lead({"a": 0.4, "b": 0.38, "c": 0.35}, documents=2) == pytest.approx(0.03)
    assert card_lead({"a": 1.0}) == 0.0 and card_lead({}, documents=2) == 0.0
