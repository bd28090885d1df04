"""Answer extraction: a number, date or name next to the question's terms, and year-to-year changes."""

from __future__ import annotations

import re

from llama_index_docmemo.reasoning.offline.question import YEAR, Question, positions
from llama_index_docmemo.reasoning.offline.units import NUMERIC_CELL, Unit
from llama_index_docmemo.text import key_of, keys, tokens

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
FULL_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+{_MONTH}\.?,?\s+\d{{4}}|{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|{_MONTH}\.?\s+\d{{4}}|\d{{4}}-\d{{2}}-\d{{2}})\b"
)
NUMBER = re.compile(
    r"(?P<cur>[$€£¥]\s?)?"
    r"(?P<num>(?<![\d.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\d.,])\d+(?:\.\d+)?)"
    r"(?P<unit>\s?%|\s?(?:per ?cent|percent|million|billion|thousand|bn|mn)\b)?"
)
_REFERENCE = re.compile(
    r"\b(?:table|figure|fig|page|pp?|section|chapter|appendix|note|slide|step|no)\.?\s*"
    r"(?:\d+[-.–])*$",
    re.IGNORECASE,
)
COUNTED_WITHIN = 3  # content words between a count and the counted noun, at most
NEXT_TO = 80  # characters between a figure and a topic word of the question, at most
_SCALE = re.compile(r"\b(thousand|million|billion)s?\b", re.IGNORECASE)
_NAME = re.compile(
    r"\b[A-Z][\w&.'-]*(?:\s+(?:of|and|the|de|for|&)\s+[A-Z][\w&.'-]*|\s+[A-Z][\w&.'-]*)*"
)


def nearest(cands: list[tuple[int, str]], anchors: list[int]) -> str | None:
    """The candidate closest to any anchor offset (the first one when there is no anchor)."""
    if not cands:
        return None
    if not anchors:
        return cands[0][1]
    return min(cands, key=lambda c: (min(abs(c[0] - a) for a in anchors), c[0]))[1]


def numbers(text: str, exclude: frozenset[str]) -> list[tuple[int, str]]:
    """Numbers in ``text`` with their offsets.

    Left out: bare years, the question's own numbers, and references ("Table 6-2", "page 9").
    """
    out = []
    for m in NUMBER.finditer(text):
        num = m.group("num")
        if (YEAR.fullmatch(num) and not m.group("unit")) or key_of(num) in exclude:
            continue
        if _REFERENCE.search(text, max(0, m.start() - 24), m.start()):
            continue
        out.append((m.start(), m.group().strip()))
    return out


def counts(q: Question, text: str, cand: tuple[int, str]) -> bool:
    """For a "how many" question: whether the counted noun follows the figure ("1,184 employees").

    A count is rarely written next to the words of the question otherwise; a figure nearby is
    more often a model number or a page number than the answer.
    """
    if q.counted is None:
        return True
    after = [t.key for t in tokens(text[cand[0] + len(cand[1]) :]) if t.key is not None]
    return q.counted in after[:COUNTED_WITHIN]


def column_value(q: Question, unit: Unit, year: str | None) -> str | None:
    """The row's cell under the column the question names (its year, else one of its words)."""
    cells = unit.cells
    if unit.header:
        offset = len(cells) - len(unit.header)
        heads = [[key_of(h.strip())] if YEAR.fullmatch(h.strip()) else keys(h) for h in unit.header]
        wanted = [key_of(year)] if year else [t.key for t in q.terms if t.kind != "generic"]
        for key in wanted:
            for idx, head in enumerate(heads):
                if 0 < idx + offset < len(cells) and key in head:
                    value = cells[idx + offset]
                    return with_scale(value, unit.header) if NUMERIC_CELL.match(value) else None
        if year:
            return None
    numeric = [c for c in cells[1:] if NUMERIC_CELL.match(c) and key_of(c) not in q.key_set]
    return numeric[0] if numeric else None


def with_scale(value: str, header: tuple[str, ...]) -> str:
    """A table cell with the scale its header states ("NOK million", "in thousands") appended.

    Tables state their scale once, above the figures; a value quoted without it would read as
    a plain number and could not be compared with the same figure written in prose.
    """
    whole = NUMBER.fullmatch(value.strip())
    if whole is None or whole.group("unit"):
        return value
    scales = {m.group(1).lower() for h in header for m in _SCALE.finditer(h)}
    return f"{value} {scales.pop()}" if len(scales) == 1 else value


def extract(q: Question, unit: Unit, year: str | None = None) -> str | None:
    """An answer span of the expected type in ``unit``, nearest to the question's terms."""
    if q.answer_type == "number":
        if unit.cells:
            return column_value(q, unit, year)
        anchors = [m.start() for m in re.finditer(re.escape(year), unit.text)] if year else []
        topic = positions(q, unit.text, topic_only=True)
        beside = [
            c
            for c in numbers(unit.text, q.key_set)
            if any(abs(c[0] - p) <= NEXT_TO for p in topic) and counts(q, unit.text, c)
        ]
        return nearest(beside, anchors or positions(q, unit.text))
    if q.answer_type == "date":
        cands = [(m.start(), m.group()) for m in FULL_DATE.finditer(unit.text)]
        if not cands:
            cands = [
                (m.start(), m.group())
                for m in YEAR.finditer(unit.text)
                if m.group() not in q.key_set
            ]
        return nearest(cands, positions(q, unit.text))
    if q.answer_type == "name":
        cands = [
            (m.start(), m.group())
            for m in _NAME.finditer(unit.text)
            if m.start() > 0 and not set(keys(m.group())) <= q.key_set
        ]
        return nearest(cands, positions(q, unit.text))
    return None


def anchored(q: Question, unit: Unit, years: tuple[str, ...] | None = None) -> bool:
    """Whether the unit holds every anchor of the question (with ``years`` replacing its years)."""
    present = unit.key_set
    needed = [t.key for t in q.anchors if years is None or t.kind != "year"]
    needed += [key_of(y) for y in years or ()]
    return all(k in present for k in needed)


def value(span: str) -> tuple[float, int, str, str] | None:
    """(value, decimals, currency, unit) of the first number in ``span``."""
    m = NUMBER.search(span)
    if not m:
        return None
    num = m.group("num").replace(",", "")
    decimals = len(num.split(".")[1]) if "." in num else 0
    return float(num), decimals, (m.group("cur") or "").strip(), (m.group("unit") or "").strip()


def difference(first: tuple[str, str], second: tuple[str, str]) -> str:
    """Change from the earlier to the later (year, value), in their shared unit when they share one."""
    (y1, s1), (y2, s2) = sorted([first, second])
    a, b = value(s1), value(s2)
    base = f"from {s1} ({y1}) to {s2} ({y2})"
    if not a or not b or a[3].lower() != b[3].lower():
        return base
    decimals = max(a[1], b[1])
    delta = round(b[0] - a[0], decimals)
    if delta == 0:
        return f"unchanged {base}"
    unit = b[3] if b[3] in ("", "%") else f" {b[3]}"
    amount = f"{b[2]}{abs(delta):,.{decimals}f}{unit}"
    return f"{'increased' if delta > 0 else 'decreased'} by {amount}, {base}"
