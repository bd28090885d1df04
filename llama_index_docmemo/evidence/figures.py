"""Figures in an answer (numbers, percentages, dates) and whether a page states them: pure text rules.

The one home of these rules: citations (:mod:`.citations`) verify an answer's figures with them,
for DocMemo's answers and, in ``docmemo compare``, for every engine's; the judge's number rule
reads values with them.

An answer's figure is *found* on a page when the page's text holds the same value:

- a **number** (``1,234.5``, ``$4.2 million``, ``(310)``): some number on the page equals it, sign
  and currency ignored; a figure written with decimals also matches a page number that rounds to
  it (``12.3`` matches ``12.34``), an integer only the same integer; a scale word (thousand,
  million, billion, ``bn``, ``m``) also admits the value in units, thousands or millions
  (``$4.2 billion`` matches ``4,200`` in a table in millions);
- a **percentage** (``12.5%``, ``12.5 percent``): the number, with or without the sign;
- a **date** (``March 3, 2023``, ``3 March 2023``, ``2023-03-03``, ``March 2023``): the same year,
  month and (when given) day in any of those forms.

Years alone are numbers. A number joined to a word by a hyphen ("GPT-4", "COVID-19") is part of a
name, not a figure. Page citations ("(p. 3)", "pp. 4-5", "page 12") are not figures: they
say where, not what. The rules are deliberately literal: a figure the engine computed (a sum,
a ratio) is on no page; :mod:`.arithmetic` checks it against the answer's other figures.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:1[89]|20)\d\d)"
_DATE_FORMS = (
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_DAY}\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(r"\b(?P<year>(?:1[89]|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH}\s+{_YEAR}\b", re.IGNORECASE),
)
_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
}
_NUMBER = re.compile(
    r"(?<![\w.,])(?<![A-Za-z]-)(?P<sign>[-−–]\s?)?(?:[$€£¥]\s?)?\(?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\d|st\b|nd\b|rd\b|th\b)\)?"
    r"(?:\s?(?P<percent>%|percent\b|per cent\b))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|mn|[kmb])\b)?",
    re.IGNORECASE,
)


_PAGE_CITATION = re.compile(r"\b(?:pp?\.|pages?)\s?\d+(?:\s?[-–,]\s?\d+)*", re.IGNORECASE)


@dataclass(frozen=True)
class Figure:
    """One figure of an answer: its text as written, its kind, and the values it may stand for.

    ``values`` holds a number's candidate values (as written, and scaled when a scale word
    follows or, for a percentage, as a fraction), each with the half-step of its last written
    digit (0 for an integer: only the same value matches); for a date, ``date`` is (year, month,
    day or 0).
    """

    text: str
    kind: str  # "number" | "percent" | "date"
    values: tuple[tuple[float, float], ...] = ()
    date: tuple[int, int, int] = (0, 0, 0)
    span: tuple[int, int] = (0, 0)  # where the answer writes it (character offsets)


def _date_of(match: re.Match[str]) -> tuple[int, int, int]:
    month = match.group("month")
    month_number = int(month) if month.isdigit() else _MONTHS[month.lower().rstrip(".")]
    day = match.groupdict().get("day")
    return int(match.group("year")), month_number, int(day) if day else 0


def _dates(text: str) -> list[tuple[re.Match[str], tuple[int, int, int]]]:
    """Date mentions, earliest first, none overlapping an earlier (more specific) form."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[re.Match[str], tuple[int, int, int]]] = []
    for form in _DATE_FORMS:
        for match in form.finditer(text):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            date = _date_of(match)
            if not 1 <= date[1] <= 12 or date[2] > 31:
                continue
            taken.append(span)
            found.append((match, date))
    return sorted(found, key=lambda item: item[0].start())


def _number_figure(match: re.Match[str]) -> Figure:
    digits = match.group("digits")
    value = float(digits.replace(",", ""))
    decimals = len(digits.partition(".")[2])
    half_step = 0.5 * 10.0**-decimals if decimals else 0.0
    factors = [1.0]
    scale_word = (match.group("scale") or "").lower()
    if match.group("percent"):
        factors.append(0.01)
    elif scale_word:
        full = _SCALES[scale_word]
        factors += [full, full / 1e3, full / 1e6]
    values = tuple(dict.fromkeys((value * f, half_step * f) for f in factors))
    kind = "percent" if match.group("percent") else "number"
    text = match.group(0).strip()
    start = match.start() + match.group(0).index(text)
    return Figure(text, kind, values, span=(start, start + len(text)))


def find_figures(text: str) -> list[Figure]:
    """Every number, percentage and date in ``text``, in order (a date's numbers are not repeated)."""
    dates = _dates(text)
    spans = [m.span() for m, _ in dates] + [m.span() for m in _PAGE_CITATION.finditer(text)]
    figures: list[tuple[int, Figure]] = [
        (m.start(), Figure(m.group(0), "date", date=date, span=m.span())) for m, date in dates
    ]
    for match in _NUMBER.finditer(text):
        if any(start <= match.start() < end for start, end in spans):
            continue
        figures.append((match.start(), _number_figure(match)))
    return [figure for _, figure in sorted(figures, key=lambda item: item[0])]


def number_values(text: str) -> list[float]:
    """Every value the numbers and percentages of ``text`` may stand for."""
    return [
        value
        for figure in find_figures(text)
        if figure.kind != "date"
        for value, _ in figure.values
    ]


def _rounds_to(page_value: float, figure: Figure) -> bool:
    """Whether the figure is ``page_value`` as written, or rounded to the figure's last digit."""
    return any(
        abs(page_value - value) <= half_step * (1 + 1e-9) for value, half_step in figure.values
    )


def locate_span(figure: Figure, page_text: str) -> tuple[int, int] | None:
    """Where ``page_text`` states ``figure`` (character offsets of the page's own writing of it,
    the first such place), or None."""
    if figure.kind == "date":
        for match, date in _dates(page_text):
            if date == figure.date or (figure.date[2] == 0 and date[:2] == figure.date[:2]):
                return match.span()
        return None
    for match in _NUMBER.finditer(page_text):
        value = float(match.group("digits").replace(",", ""))
        if _rounds_to(value, figure):
            return match.span("digits")
    return None


def locate(figure: Figure, page_text: str) -> str | None:
    """The text on the page that states ``figure`` (as the page writes it), or None."""
    span = locate_span(figure, page_text)
    return page_text[span[0] : span[1]] if span else None


def values_match(expected: Sequence[float], stated: Sequence[float], rel_tol: float) -> bool:
    """Whether a stated value equals an expected one within ``rel_tol`` (a percentage may be
    written as a fraction or the reverse)."""
    return any(
        math.isclose(candidate, value, rel_tol=rel_tol, abs_tol=1e-9)
        for gold in expected
        for candidate in (gold, gold / 100.0, gold * 100.0)
        for value in stated
    )
