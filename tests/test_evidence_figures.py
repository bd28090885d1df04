"""Figure check: numbers, percentages and dates of an answer against the text of pages."""

from __future__ import annotations

import pytest

from llama_index_docmemo.evaluation.judge import is_short_number, parse_score
from llama_index_docmemo.evidence.matching import (
    find_figures,
    locate,
    number_values,
    values_match,
)


def texts(answer: str) -> list[tuple[str, str]]:
    return [(f.text, f.kind) for f in find_figures(answer)]


def test_figures_of_an_answer_in_order_dates_whole() -> None:
    answer = "Revenue was $4.2 billion in 2023, up 12.5% since March 3, 2022 (see the 2nd table)."
    assert texts(answer) == [
        ("$4.2 billion", "number"),
        ("2023", "number"),
        ("12.5%", "percent"),
        ("March 3, 2022", "date"),
    ]  # ordinals are not figures; the date's 3 and 2022 are not repeated
    assert texts("Margin 12.3 percent on 2023-03-31, (310) in Q4") == [
        ("12.3 percent", "percent"),
        ("2023-03-31", "date"),
        ("(310)", "number"),
    ]


def test_page_citations_are_not_figures() -> None:
    """DocMemo's answers cite pages as "(p. 3)": where, not what."""
    answer = "Revenue was 4,212 (p. 3); headcount 1,184 (pp. 11-12, page 14)."
    assert texts(answer) == [("4,212", "number"), ("1,184", "number")]
    assert texts("GPT-4 wins on 2 of the COVID-19 sets, down -3") == [
        ("2", "number"),
        ("-3", "number"),
    ]


@pytest.mark.parametrize(
    ("answer", "page", "stated"),
    [
        ("$4.2 billion", "Net revenue 4,200 (in millions of dollars)", "4,200"),
        ("$4.2 billion", "Revenue was 4.2 billion", "4.2"),
        ("4,200,000", "a total of 4200000 units", "4200000"),
        ("12.3%", "margin of 12.34 %", "12.34"),  # written with a decimal: a rounding matches
        ("12.5%", "grew 12.5 percent", "12.5"),
        ("31 March 2023", "for the year ended March 31, 2023", "March 31, 2023"),
        ("March 2023", "on 2023-03-15 the board met", "2023-03-15"),
        ("(310)", "a loss of 310 million", "310"),
    ],
)
def test_a_figure_is_located_as_the_page_writes_it(answer: str, page: str, stated: str) -> None:
    (figure,) = find_figures(answer)
    assert locate(figure, page) == stated


@pytest.mark.parametrize(
    ("answer", "page"),
    [
        ("12 employees", "12.4 employees"),  # an integer only matches the same integer
        ("12.3%", "12.4%"),
        ("$4.2 billion", "4,300 million"),
        ("12.5%", "0.13 of revenue"),  # the fraction form keeps its own precision
        ("March 3, 2022", "March 4, 2022"),
        ("2023", "2024 and 2022"),
    ],
)
def test_a_different_figure_is_not_found(answer: str, page: str) -> None:
    (figure,) = find_figures(answer)
    assert locate(figure, page) is None


def test_number_rule_values() -> None:
    assert values_match(number_values("4.2 million"), number_values("It was $4,200,000."), 0.01)
    assert values_match(number_values("12.5%"), number_values("about 0.125"), 0.01)
    assert not values_match(number_values("4.2 million"), number_values("4.5 million"), 0.01)
    assert is_short_number("$4.2 million") and is_short_number("12.5%") and is_short_number("(310)")
    assert not is_short_number("Ann Smith") and not is_short_number("about 4 people in 2023")


def test_correctness_scores_are_read_from_one_line_replies_too() -> None:
    assert parse_score("4.5\nSame figure.") == (4.5, "Same figure.")
    assert parse_score("Score: 2") == (2.0, "Score: 2")
    assert parse_score("I cannot judge this.")[0] is None
    assert parse_score("10 out of 10")[0] is None  # not a 1-5 score


@pytest.mark.parametrize(
    "reply",
    [
        "The generated answer gives 31,337 and 4,242, not the reference figure.",
        "Both mention 2 segments and 3 plants; the answer is partly right.",
        "4\nScore: 2",  # score lines that disagree
        "5.5\nAbove the scale.",
        "The answer is wrong on page 4.\nI would rate it low.",
    ],
)
def test_a_digit_inside_the_reasoning_is_never_a_score(reply: str) -> None:
    assert parse_score(reply) == (None, reply)


@pytest.mark.parametrize(
    ("reply", "score"),
    [("**Score:** 4/5\nClose.", 4.0), ("The figures match.\n3", 3.0), ("Score: 4 out of 5.", 4.0)],
)
def test_a_line_holding_only_the_score_is_read(reply: str, score: float) -> None:
    assert parse_score(reply)[0] == score
