"""What an answer says and whether a page says it too: the matching rules, pure text.

The one home of these rules: citations (:mod:`.citations`) verify an answer's figures, names and
quotes with them, for DocMemo's answers and, in ``docmemo compare``, for every engine's; the
judge's number rule reads values with them.

**Figures** (numbers, percentages, dates). An answer's figure is *found* on a page when the page's
text holds the same value:

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
a ratio) is on no page; it is checked against the answer's other figures (computed figures,
below).

**Quotes and names**. A reader's quote or a name of the answer is *found* on a page when the
page's text holds the same words in the same order, after normalisation: case, runs of white
space (line breaks of the text layer or the OCR), typographic quotes and dashes, and a word
hyphenated across a line break ("reve-\\nnue") do not count. A quote cut with an ellipsis ("...",
"…") is found when its pieces are, in order. Anything else (a paraphrase, a changed word) is not
found: the check is literal on purpose, since code, not the model, decides what a page says.

A *name* is a run of two or more capitalised words ("Acme Holdings", "Bank of America"), a
leading "The"/"A"/"An" left out, months and weekdays excluded (dates are figures); an answer that
is nothing but one capitalised word ("Canada") is a name too.

**Computed figures**: a figure an answer computed from two of its cited figures (sum,
difference, ratio, percent change). An answer often states a figure no page does because the
reader computed it ("increased by 35.8 million, from 212.5 million to 248.3 million"). Code
checks the arithmetic: the figure is *computed* when two other figures of the same answer, each
stated on a page read, give it by

- a **sum** ``a + b`` or a **difference** ``|a − b|`` of like figures (``12.1%`` and ``14.3%``
  give ``2.2`` percentage points; a scale word counts: ``1.2 billion − 800 million`` gives
  ``400 million``);
- a **ratio** ``a / b`` (``1.17``, or a percentage: ``45%`` is ``0.45``);
- a **percent change** ``(b − a) / a`` (as a percentage: ``16.8%``), either direction, sign
  ignored as figures' signs are.

The computed value must round to the figure as written (its last digit's half-step, as
a page's numbers are matched). Dates and bare years are neither targets nor operands: a
year labels a figure, it is not one to compute with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import permutations

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


# Quotes and names.

_TRANSLATE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u00ad": "",  # soft hyphen
    }
)
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-\s*\n\s*(?=[a-z])")
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)\s*")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_CONNECTORS = frozenset({"of", "&", "de", "du", "la", "for"})
_ARTICLES = frozenset({"the", "a", "an"})
_WORD = re.compile(r"[A-Za-z][\w&'.-]*")


@dataclass(frozen=True)
class NormalText:
    """A text lower-cased with white space, quotes and dashes normalised, and for each of its
    characters the offset of the original character it came from."""

    text: str
    origin: tuple[int, ...]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``text[start:end]`` stands for."""
        return self.origin[start], self.origin[end - 1] + 1


def normalise(text: str) -> NormalText:
    """``text`` as the quote rules compare it (see the module docstring)."""
    chars: list[str] = []
    origin: list[int] = []
    pending_space = False
    at = 0
    while at < len(text):
        joint = _HYPHEN_BREAK.match(text, at)
        if joint is not None and joint.end() > at:  # "reve-\nnue" reads "revenue"
            at = joint.end()
            continue
        for char in text[at].translate(_TRANSLATE).lower():
            if char.isspace():
                pending_space = bool(chars)
                continue
            if pending_space:
                chars.append(" ")
                origin.append(at)
                pending_space = False
            chars.append(char)
            origin.append(at)
        at += 1
    return NormalText("".join(chars), tuple(origin))


def quote_span(
    quote: str, page_text: str, normal: NormalText | None = None
) -> tuple[int, int] | None:
    """Where ``page_text`` says ``quote`` (offsets in ``page_text``, from the first piece's start to
    the last piece's end), or None; a quote of fewer than two characters is never found.
    ``normal``: ``normalise(page_text)`` when the caller keeps it (one page, many quotes)."""
    pieces = [normalise(p).text for p in _ELLIPSIS.split(quote)]
    pieces = [p for p in pieces if p]
    if not pieces or sum(map(len, pieces)) < 2:
        return None
    page = normal or normalise(page_text)
    ends: list[tuple[int, int]] = []
    at = 0
    for piece in pieces:
        found = page.text.find(piece, at)
        if found < 0:
            return None
        at = found + len(piece)
        ends.append((found, at))
    return page.original_span(ends[0][0], ends[-1][1])


def _capitalised(word: str) -> bool:
    return word[0].isupper() and word.lower().strip(".") not in _CALENDAR


def find_names(text: str) -> list[tuple[str, tuple[int, int]]]:
    """The names of ``text`` with their spans, in order (see the module docstring)."""
    words = list(_WORD.finditer(text))
    names: list[tuple[str, tuple[int, int]]] = []
    run: list[re.Match[str]] = []

    def close() -> None:
        while run and run[-1].group(0).lower() in _CONNECTORS:
            run.pop()
        while run and run[0].group(0).lower() in _ARTICLES:
            run.pop(0)
        if len(run) >= 2:
            start = run[0].start()
            name = text[start : run[-1].end()].rstrip(".")
            names.append((name, (start, start + len(name))))
        run.clear()

    for i, match in enumerate(words):
        word = match.group(0)
        gap = text[words[i - 1].end() : match.start()] if i else ""
        if run and gap.strip():  # punctuation between words ends a name
            close()
        if _capitalised(word) or (run and word.lower() in _CONNECTORS):
            run.append(match)
        else:
            close()
    close()
    alone = text.strip().rstrip(".")
    if not names and _WORD.fullmatch(alone) and _capitalised(alone):
        start = text.index(alone)
        names.append((alone, (start, start + len(alone))))
    return names


# Computed figures.

_BARE_YEAR = re.compile(r"(?:1[89]|20)\d\d")

Operation = Callable[[float, float], "float | None"]
_OPERATIONS: tuple[tuple[str, str, Operation], ...] = (
    ("sum", "+", lambda a, b: a + b),
    ("difference", "−", lambda a, b: a - b),
    ("ratio", "/", lambda a, b: a / b if b else None),
    ("percent change", "→", lambda a, b: (b - a) / a if a else None),
)


@dataclass(frozen=True)
class Derivation:
    """How a figure is computed: the operation and its two operands, as the answer writes them."""

    operation: str  # "sum" | "difference" | "ratio" | "percent change"
    left: str
    right: str

    @property
    def formula(self) -> str:
        """The computation as a reader redoes it: ``difference: 248.3 million − 212.5 million``,
        ``percent change: 212.5 million → 248.3 million``."""
        symbol = next(s for name, s, _ in _OPERATIONS if name == self.operation)
        return f"{self.operation}: {self.left} {symbol} {self.right}"


def is_bare_year(text: str) -> bool:
    """Whether ``text`` is a year alone (``2023``): a label of other figures, not a quantity."""
    return _BARE_YEAR.fullmatch(text.strip().strip("()")) is not None


def _quantity(figure: Figure) -> float:
    """The figure's value as a quantity: scaled by its scale word (the second candidate value of
    :func:`~.figures.find_figures`'s numbers), a percentage as written."""
    if figure.kind == "number" and len(figure.values) > 1:
        return figure.values[1][0]
    return figure.values[0][0]


def _matches(value: float, target: Figure) -> bool:
    """Whether ``value`` rounds to one of the values the target may stand for (as written, scaled
    by its scale word, a percentage as a fraction: :class:`~.figures.Figure`)."""
    return any(
        abs(abs(value) - want) <= half_step * (1 + 1e-9) + 1e-9 * abs(want)
        for want, half_step in target.values
    )


def _computable(figure: Figure) -> bool:
    return figure.kind != "date" and bool(figure.values) and not is_bare_year(figure.text)


def _applies(operation: str, target: Figure, left: Figure, right: Figure) -> bool:
    """A sum or difference adds like to like (two percentages may give percentage points); a
    percent change is written as a percentage of two numbers; a ratio reads any two figures."""
    if operation in ("sum", "difference"):
        return left.kind == right.kind and target.kind in (left.kind, "number")
    if operation == "percent change":
        return target.kind == "percent" and left.kind == right.kind == "number"
    return True


def derive(target: Figure, operands: Sequence[Figure]) -> Derivation | None:
    """The first way (in the order of the module's list, operands in answer order) two of
    ``operands`` give ``target``, or None."""
    if not _computable(target):
        return None
    usable = [f for f in operands if _computable(f) and f.span != target.span]
    for name, _, operation in _OPERATIONS:
        for left, right in permutations(usable, 2):
            if not _applies(name, target, left, right):
                continue
            value = operation(_quantity(left), _quantity(right))
            if value is not None and _matches(value, target):
                if name == "difference" and value < 0:  # written larger first
                    left, right = right, left
                return Derivation(name, left.text, right.text)
    return None
