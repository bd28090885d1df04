"""The offline reader's modules one by one: question analysis, units, labels, extraction, passages,
and the strong-evidence "unanswerable" rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.offline import OfflineReader
from llama_index_docmemo.readers.offline.reader import (
    column_value,
    difference,
    explored,
    extract,
    numbers,
    strongly_unanswerable,
    with_scale,
)
from llama_index_docmemo.readers.offline.scoring import (
    Unit,
    analyse,
    answer_type,
    best_passages,
    evaluate,
    label,
    no_answer_text,
    page_units,
    table_rows,
    unit_score,
)
from llama_index_docmemo.text import keys
from llama_index_docmemo.types import PageRef

REF = PageRef("doc.pdf", 3)


def kinds(question: str) -> dict[str, str]:
    return {t.surface: t.kind for t in analyse(question).terms}


# -- question analysis ---------------------------------------------------------------------------
def test_names_are_capitalised_mid_sentence_or_short_acronyms() -> None:
    got = kinds("According to the report, what was the revenue of Nordic Steel in 2023?")
    assert got["According"] == "generic"  # boilerplate, and it starts the sentence
    assert got["Nordic"] == got["Steel"] == "entity"
    assert got["2023"] == "year" and got["revenue"] == "word"
    assert kinds("what is roa for ADBE in FY2015?")["ADBE"] == "entity"
    assert kinds("TOP concerns DISCUSSED in the deck?")["DISCUSSED"] == "word"  # emphasis
    assert all(k != "entity" for k in kinds("WHAT IS USCA CASE NUMBER?").values())  # all capitals
    assert kinds("How many districts were sampled during Wave III?")["III"] == "number"


def test_instructions_and_examples_after_the_question_name_no_anchors() -> None:
    q = analyse("What is the date of the document? Format your answer as YYYY-MM-DD.")
    assert q.anchors == ()
    q = analyse("Which years are in the chart? List them like ['2006', '2007']")
    assert all(t.surface not in ("2006", "2007") for t in q.terms)
    q = analyse("Which is greater? Foreign born Latinos, or Latinos interviewed by cellphone?")
    assert "cellphone" in {t.surface for t in q.terms}  # still scored, as words


def test_answer_types_and_comparisons() -> None:
    assert answer_type("When did the plant open?") == "date"
    assert answer_type("How many employees were there?") == "number"
    assert answer_type("Who chairs the board?") == "name"
    assert answer_type("Why did margins fall?") == "text"
    assert analyse("What was the change in revenue between 2023 and 2024?").comparison
    assert not analyse("What was revenue in 2023 and 2024?").comparison
    assert analyse("What is the gap between men and women aged 65+?").derived
    assert not analyse("How many employees were in the Nordic region?").derived
    assert (
        analyse("How many employees were in the Nordic region?").counted
        == analyse("employee").terms[0].key
    )


def test_no_exact_answer_for_a_value_computed_from_others() -> None:
    page = PageView(REF, "In 2024, 42% of Nordic men aged 65+ used the internet and 30% broadband.")
    question = "What is the percentage gap between Nordic men using internet and broadband in 2024?"
    fb = OfflineReader().read(ReaderInput(question, question, [page], final_round=True))
    assert fb.status == "need_more" and fb.answer is not None and "42%" in fb.answer  # quoted


# -- units -----------------------------------------------------------------------------------------
PYMUPDF_TABLE = "Key figures\nNOK million\n2024\n2023\nRevenue\n3,412\n3,186\nEBITDA\n611\n542\n"


def test_cell_per_line_tables_become_rows_under_their_header() -> None:
    units = page_units(REF, PYMUPDF_TABLE + "Revenue grew in all regions. Margins held.")
    rows = [u for u in units if u.cells]
    assert [r.cells for r in rows] == [("Revenue", "3,412", "3,186"), ("EBITDA", "611", "542")]
    assert all(r.header == ("NOK million", "2024", "2023") for r in rows)
    sentences = [u.text for u in units if not u.cells]
    assert sentences == ["Key figures Revenue grew in all regions.", "Margins held."]
    assert table_rows(["|a|b|c|", "|---|---|---|", "|x|1|2|"])[1][0] == ("x", "1", "2")


PYPDF_TABLE = (
    "Table 3: Employees by region at the end of the year (headcount)\nRegion 2024 2023\n"
    "Nordic 1,184 1,102\nAsia-Pacific 171 179\nAnnual Report 2024 - 11\n"
)


def test_single_spaced_rows_of_pypdf_become_rows_under_their_header() -> None:
    rows = [u for u in page_units(REF, PYPDF_TABLE) if u.cells]
    assert [r.cells for r in rows] == [("Nordic", "1,184", "1,102"), ("Asia-Pacific", "171", "179")]
    assert all(r.header == ("Region", "2024", "2023") for r in rows)
    # prose ending in one figure, or in a sentence mark before figures, stays prose
    assert not [u for u in page_units(REF, "Engagement rose to 78\nIt was 2023. 12 14") if u.cells]


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab 12,.|\n\tRevenue"), max_size=300))
def test_units_belong_to_their_page_and_quote_its_words(text: str) -> None:
    page_words = set(text.split()) | {c.strip() for c in text.replace("\t", "|").split("|")}
    for unit in page_units(REF, text):
        assert unit.page == REF
        assert unit.keys == tuple(keys(unit.text))
        assert all(w in page_words or w in text for w in unit.text.split())


# -- labels ----------------------------------------------------------------------------------------
def test_a_unit_with_the_question_terms_together_makes_its_page_useful() -> None:
    q = analyse("How many employees worked in the Nordic region in 2024?")
    good = page_units(REF, "In 2024 the Nordic region had 1,184 employees.")
    other = page_units(REF, "Sustainability targets were set for 2030 across the Group.")
    assert label(evaluate(q, REF, good)) == "useful"
    assert label(evaluate(q, REF, other)) == "irrelevant"


@settings(max_examples=100, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["Nordic", "employees", "2024", "the", "grew", "5"]), max_size=20
    )
)
def test_unit_scores_stay_between_zero_and_coverage_plus_bonus(words: list[str]) -> None:
    q = analyse("How many employees worked in the Nordic region in 2024?")
    text = " ".join(words)
    score = unit_score(q, Unit(REF, text, tuple(keys(text))))
    assert 0.0 <= score <= 1.1 + 1e-9


# -- extraction ------------------------------------------------------------------------------------
def test_numbers_leave_out_bare_years_and_the_questions_numbers() -> None:
    found = [s for _, s in numbers("In 2023 sales were 41.2 million, up 5%", frozenset({"5"}))]
    assert found == ["41.2 million"]
    refs = "Table 6-2 lists 14 operations; see page 9 and Note 7."
    assert [s for _, s in numbers(refs, frozenset())] == ["14"]


def test_table_values_take_the_scale_of_their_header() -> None:
    assert with_scale("248.3", ("NOK million", "2024")) == "248.3 million"
    assert with_scale("12%", ("in millions",)) == "12%"
    assert with_scale("7", ("Region", "2024")) == "7"
    q = analyse("What was Revenue in 2023?")
    row = next(u for u in page_units(REF, PYMUPDF_TABLE) if u.cells)
    assert column_value(q, row, "2023") == "3,186 million"
    assert column_value(q, row, "2019") is None  # no such column: no guess


def test_dates_and_differences() -> None:
    q = analyse("When did the Tampere plant start production?")
    unit = page_units(
        REF, "Built from 2022, the Tampere plant started production on 14 March 2024."
    )[0]
    assert extract(q, unit) == "14 March 2024"
    assert difference(("2024", "41.2 million"), ("2023", "36.6 million")) == (
        "increased by 4.6 million, from 36.6 million (2023) to 41.2 million (2024)"
    )
    assert difference(("2023", "5%"), ("2024", "12 million")).startswith("from 5% (2023)")


# -- passages and the strong-evidence rule ---------------------------------------------------------
def test_passages_are_the_best_matching_units_once_each_with_pages() -> None:
    q = analyse("How many people does the Tampere plant employ?")
    units = page_units(PageRef("d", 9), "The Tampere plant employs 180 people. It opened in 2024.")
    units += page_units(PageRef("d", 2), "The Tampere plant employs 180 people. Weather was fine.")
    best = best_passages(q, units, limit=2)
    assert [u.page.page for u in best] == [9]  # the same sentence twice is quoted once
    text = no_answer_text(12, [(u.page, u.fact()) for u in best])
    assert text.splitlines() == [
        "No answer was found in the 12 pages read. The most relevant passages:",
        "- [p. 9] The Tampere plant employs 180 people.",
    ]
    assert no_answer_text(None, []) == "No answer was found in the pages read."


def test_strong_evidence_needs_an_explored_document_no_evidence_and_absent_anchors() -> None:
    q = analyse("What did the Oulu office spend in 2019?")
    seen = frozenset(keys("The Tampere plant opened in 2024. Spending rose."))
    final = ReaderInput("q", "q", [], final_round=True)
    early = ReaderInput("q", "q", [], pages_read_total=3, pages_in_scope=30)
    assert explored(final) and not explored(early)
    assert strongly_unanswerable(q, final, seen, False, 1.0)
    assert not strongly_unanswerable(q, early, seen, False, 1.0)
    assert not strongly_unanswerable(q, final, seen, True, 1.0)  # evidence was found
    half = seen | frozenset(keys("Oulu"))
    assert not strongly_unanswerable(q, final, half, False, 1.0)
    assert strongly_unanswerable(q, final, half, False, 0.4)
    assert not strongly_unanswerable(q, final, seen, False, 1.0, page_words=[200, 12])  # a slide
    assert strongly_unanswerable(q, final, seen, False, 1.0, page_words=[200, 80])
    vague = analyse("What did the office spend?")  # no anchor: never "unanswerable"
    assert not strongly_unanswerable(vague, final, frozenset(), False, 1.0)


NAMES = ["Tampere", "Oulu", "Riga", "Halvorsen", "Nordic"]
YEARS = ["2019", "2021", "2023", "2024"]


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    year=st.sampled_from(YEARS),
    filler=st.lists(st.sampled_from(["revenue", "grew", "the", "plant", "in", "."]), max_size=30),
    final=st.booleans(),
)
def test_never_unanswerable_when_the_question_s_anchors_are_on_a_page_read(
    name: str, year: str, filler: list[str], final: bool
) -> None:
    question = f"What was the dividend of the {name} subsidiary in {year}?"
    body = " ".join([*filler[: len(filler) // 2], name, year, *filler[len(filler) // 2 :]])
    pages = [PageView(PageRef("d", 1), body), PageView(PageRef("d", 2), " ".join(filler))]
    inp = ReaderInput(
        question, question, pages, final_round=final, pages_read_total=29, pages_in_scope=30
    )
    assert OfflineReader().read(inp).status != "unanswerable"
