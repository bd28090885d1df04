"""How the offline reader matches a question with page text (pure): the question's side and the
page's, scored against each other.

- **The question**: its key terms, their weights, and the kind of answer it asks for.
- **Units**: a page's text cut into sentences and table rows (a row keeps its column header), the
  grain of scoring and quoting.
- **Labels**: how well a unit and a page match the question, and the page's useful/irrelevant
  label.
- **Passages**: what the reader shows when it has no confident answer, the units that match the
  question best, with their pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from llama_index_docmemo.text import keys, tokens, word_key
from llama_index_docmemo.types import PageRef

# The question (the module docstring).

AnswerType = Literal["number", "date", "name", "text"]
TermKind = Literal["year", "number", "entity", "word", "generic"]

YEAR = re.compile(r"(?<![\d.,])(?:19|20)\d{2}(?![\d.,]\d)")
TERM_WEIGHT: dict[TermKind, float] = {
    "year": 2.0,
    "number": 2.0,
    "entity": 1.5,
    "word": 1.0,
    "generic": 0.3,
}
# Words that phrase a question about a document, or name a quantity in general, rather than
# naming its topic: they count little when a page is matched against the question.
_GENERIC_WORDS = """according mentioned shown show given described stated reported listed document
    report page paper text give tell name named answer question based please many much number total
    amount value figure table chart data information year percentage percent proportion share rate
    list kind type main current new one two first second last difference change compare increase
    decrease appendix section chapter slide"""
GENERIC = frozenset(k for k in map(word_key, _GENERIC_WORDS.split()) if k is not None)
_EXAMPLE = re.compile(r"\[[^\]]*\]")  # an answer-format example: ["1","2"], ['2014', '2018']
_SENTENCE_START = re.compile(r"(?:^|[.?!:;]\s+)$")
_ROMAN = re.compile(r"[IVX]+")  # a numeral (Wave II): a number, not a name
_MAX_ACRONYM = 5  # an all-capitals word longer than this is emphasis, not a name
_HOW_MANY = re.compile(r"\bhow many\s+(?:of\s+the\s+)?([^\W\d_]+)", re.IGNORECASE)
_DERIVED = re.compile(
    r"\b(gap|difference|differ|compared?|ratio|average|mean|sum of|in total|combined"
    r"|how (much|many) (more|less|fewer|higher|lower))\b"
)
_COMPARISON = re.compile(r"\b(change|difference|increase|decrease|grow|growth|compared?)")


@dataclass(frozen=True)
class Term:
    """One key term of a question: its match key, how the question writes it, and its kind."""

    key: str
    surface: str
    kind: TermKind

    @property
    def weight(self) -> float:
        return TERM_WEIGHT[self.kind]


@dataclass(frozen=True)
class Question:
    """An analysed question: weighted terms, the expected answer type, and whether it compares years."""

    terms: tuple[Term, ...]
    answer_type: AnswerType
    comparison: bool
    counted: str | None = None  # key of the noun a "how many" question counts
    derived: bool = False  # asks for a value computed from others (a gap, a ratio, an average)

    @cached_property
    def total_weight(self) -> float:
        return sum(t.weight for t in self.terms) or 1.0

    @cached_property
    def years(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.kind == "year")

    @cached_property
    def anchors(self) -> tuple[Term, ...]:
        """Years, numbers and names: the terms a page about this question must contain."""
        return tuple(t for t in self.terms if t.kind in ("year", "number", "entity"))

    @cached_property
    def specific(self) -> bool:
        """Whether the question names a year or a name: what an exact answer must sit next to."""
        return any(t.kind in ("year", "entity") for t in self.terms)

    @cached_property
    def distinctive(self) -> tuple[Term, ...]:
        """Years and names: the anchors whose absence from a document is telling.

        Plain numbers are left out: in questions they mostly point at a figure, a page or a
        list position ("Figure 2", "page 9", "top 2") rather than at the document's content.
        """
        return tuple(t for t in self.terms if t.kind in ("year", "entity"))

    @cached_property
    def topic(self) -> tuple[Term, ...]:
        """Words and names: what the question is about (years alone are not a topic)."""
        return tuple(t for t in self.terms if t.kind in ("word", "entity"))

    @cached_property
    def key_set(self) -> frozenset[str]:
        return frozenset(t.key for t in self.terms)

    @cached_property
    def topic_weight(self) -> float:
        return sum(t.weight for t in self.topic)

    @cached_property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Neighbouring specific terms of the question (their closeness in a unit is a bonus)."""
        specific = [t.key for t in self.terms if t.kind != "generic"]
        return tuple(zip(specific, specific[1:], strict=False))


def answer_type(question: str) -> AnswerType:
    """The kind of answer the question's wording asks for ("text" when it says nothing specific)."""
    low = question.lower()
    if low.startswith("when") or re.search(r"\b(what|which|in which) (year|date|month|day)\b", low):
        return "date"
    if re.search(
        r"\bhow (many|much|long|old|large|big)\b|\b(percentage|percent|proportion|ratio|rate|margin"
        r"|number of|total|amount|spending|revenue|cost|price|growth|change|difference|increase"
        r"|decrease)\b",
        low,
    ):
        return "number"
    if low.startswith("who") or re.search(
        r"\b(which|what) (company|companies|person|country|city)\b", low
    ):
        return "name"
    return "text"


def analyse(question: str) -> Question:
    """Key terms of a question, weighted: years, numbers and names count more than generic words.

    A name is a capitalised word that does not start a sentence, or an acronym (an all-capitals
    word of at most five letters in a question not written all in capitals). Only the question
    itself, up to its first question mark, names anchors: what follows is often an instruction
    about the answer's form ("Format your answer as YYYY-MM-DD"), and bracketed answer examples
    are left out entirely.
    """
    text = _EXAMPLE.sub(" ", question)
    end = text.find("?")
    core_end = end if 0 <= end < len(text.rstrip()) - 1 else len(text)
    shouting = text.isupper()
    terms: dict[str, Term] = {}
    for tok in tokens(text):
        if tok.key is None:
            continue
        raw = tok.surface
        kind: TermKind
        if tok.key in GENERIC:
            kind = "generic"
        elif tok.start > core_end:
            kind = "word"
        elif tok.is_number or (len(raw) > 1 and _ROMAN.fullmatch(raw)):
            kind = "year" if YEAR.fullmatch(raw) else "number"
        elif _is_name(raw, text[: tok.start], shouting):
            kind = "entity"
        else:
            kind = "word"
        if tok.key not in terms or TERM_WEIGHT[kind] > terms[tok.key].weight:
            terms[tok.key] = Term(tok.key, raw, kind)
    atype = answer_type(question)
    comparison = (
        atype == "number"
        and sum(1 for t in terms.values() if t.kind == "year") >= 2
        and bool(_COMPARISON.search(question.lower()))
    )
    derived = bool(_DERIVED.search(question.lower()))
    return Question(tuple(terms.values()), atype, comparison, _counted(text), derived)


def _counted(text: str) -> str | None:
    """The key of the noun after "how many" ("How many employees ..." -> employee)."""
    m = _HOW_MANY.search(text)
    return word_key(m.group(1)) if m else None


def _is_name(word: str, before: str, shouting: bool) -> bool:
    """Whether a question word reads as a name: capitalised mid-sentence, or a short acronym."""
    if shouting or not word[0].isupper():
        return False
    if len(word) > 1 and word.isupper():
        return len(word) <= _MAX_ACRONYM and not _ROMAN.fullmatch(word)
    return _SENTENCE_START.search(before) is None


def positions(question: Question, text: str, topic_only: bool = False) -> list[int]:
    """Character offsets in ``text`` of the tokens that match the question's terms (or topic)."""
    wanted = frozenset(t.key for t in question.topic) if topic_only else question.key_set
    return [t.start for t in tokens(text) if t.key in wanted]


# Units (the module docstring).

NUMERIC_CELL = re.compile(
    r"^[(\-–−+]?\s?(?:[$€£¥])?\s?\d[\d,]*(?:\.\d+)?\s?(?:%|million|bn|m)?\)?$"
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9(\"“])")
FACT_CHARS = 320
_MAX_SENTENCE = 400
_LABEL_CHARS = 60
_MAX_CELLS = 8


@dataclass(frozen=True)
class Unit:
    """A sentence or a table row of one page (a row keeps its column header when one precedes it)."""

    page: PageRef
    text: str
    keys: tuple[str, ...]
    cells: tuple[str, ...] = ()
    header: tuple[str, ...] = ()

    @cached_property
    def key_set(self) -> frozenset[str]:
        return frozenset(self.keys) | frozenset(k for c in self.header for k in keys(c))

    def fact(self) -> str:
        """The unit as a quotable fact: a table row with its header, or the (shortened) sentence."""
        if self.cells:
            rows = [self.header, self.cells] if self.header else [self.cells]
            return "\n".join("|" + "|".join(r) + "|" for r in rows)
        return self.quote()

    def quote(self) -> str:
        """The unit in the page's own words (a row's cells in order), for a citation to find."""
        return self.text if len(self.text) <= FACT_CHARS else self.text[: FACT_CHARS - 1] + "…"


def row_cells(line: str) -> tuple[str, ...] | None:
    """The cells of a markdown, tab- or wide-space-separated table line; None for prose."""
    s = line.strip()
    if "|" not in s and "\t" not in s and "  " not in s:
        return None
    if s.startswith("|") and s.count("|") >= 3:
        cells = tuple(c.strip() for c in s.strip("|").split("|"))
        return None if all(set(c) <= set("-: ") for c in cells) else cells
    parts = tuple(p for p in re.split(r"\t|\s{2,}", s) if p)
    return parts if len(parts) >= 2 else None


def spaced_row(line: str) -> tuple[str, ...] | None:
    """A label then two or more figures, single-spaced ("Nordic 1,184 1,102"): how pypdf, the
    text layer of LlamaIndex's default PDF reader, writes a table row. None otherwise."""
    words = line.split()
    n = len(words)
    while n > 0 and NUMERIC_CELL.match(words[n - 1]):
        n -= 1
    label = " ".join(words[:n])
    if len(words) - n < 2 or not label or len(label) > _LABEL_CHARS:
        return None
    if not any(ch.isalpha() for ch in label) or label[-1] in ".,;:!?":
        return None
    return (label, *words[n:])


def table_rows(lines: list[str]) -> list[tuple[tuple[str, ...], int, int]]:
    """Table rows with their line span: markdown/spaced rows, or a label line then numeric cells.

    The second shape is how PyMuPDF's plain text writes a table: each cell on its own line; a
    single-spaced label-and-figures line (:func:`spaced_row`) is pypdf's.
    """
    rows: list[tuple[tuple[str, ...], int, int]] = []
    i = 0
    while i < len(lines):
        cells = row_cells(lines[i]) or spaced_row(lines[i])
        if cells:
            rows.append((cells, i, i + 1))
            i += 1
            continue
        j = i + 1
        while j < len(lines) and j - i <= _MAX_CELLS and NUMERIC_CELL.match(lines[j]):
            j += 1
        label = lines[i]
        if j > i + 1 and len(label) <= _LABEL_CHARS and any(ch.isalpha() for ch in label):
            rows.append(((label, *lines[i + 1 : j]), i, j))
            i = j
        else:
            i += 1
    return rows


def is_header(cells: tuple[str, ...]) -> bool:
    """A row of column heads: years or words, and no other figure."""
    return not any(NUMERIC_CELL.match(c) and not YEAR.fullmatch(c.strip()) for c in cells)


def page_units(page: PageRef, text: str) -> list[Unit]:
    """Table rows (with their header when one precedes them) and the sentences around them."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    units: list[Unit] = []
    header: tuple[str, ...] = ()
    in_table = [False] * len(lines)
    for cells, start, end in table_rows(lines):
        in_table[start:end] = [True] * (end - start)
        if is_header(cells):
            header = cells
            continue
        row_header = header if header and len(header) in (len(cells), len(cells) - 1) else ()
        joined = " ".join(cells)
        units.append(Unit(page, joined, tuple(keys(joined)), cells, row_header))
    prose = " ".join(ln for ln, table in zip(lines, in_table, strict=True) if not table)
    for sentence in _SENTENCE_END.split(prose):
        pieces = [sentence] if len(sentence) <= _MAX_SENTENCE else windows(sentence)
        units.extend(Unit(page, p, tuple(keys(p))) for p in pieces if p)
    return units


def windows(text: str, size: int = 300) -> list[str]:
    """``text`` cut at word boundaries into pieces of at most about ``size`` characters."""
    out, cur = [], ""
    for w in text.split():
        if len(cur) + len(w) + 1 > size and cur:
            out.append(cur)
            cur = ""
        cur = f"{cur} {w}".strip()
    return [*out, cur] if cur else out


# Labels (the module docstring).

Label = Literal["useful", "irrelevant", "unknown"]

USEFUL = 0.5  # a unit scoring this much makes its page useful
IRRELEVANT = 0.3  # a page covering less of the question's weight than this is irrelevant
_CLOSE_TOKENS = 3
_CLOSE_BONUS = 0.1
_OFF_TOPIC_FACTOR = 0.5


@dataclass
class PageEval:
    """A page matched against the question: weight covered, best unit score, units best first."""

    ref: PageRef
    coverage: float
    best: float
    specific: bool
    units: list[tuple[float, Unit]] = field(default_factory=list)


def on_topic(q: Question, present: frozenset[str]) -> bool:
    """Whether ``present`` holds at least half of the question's topic weight (years are no topic)."""
    if not q.topic:
        return True
    return sum(t.weight for t in q.topic if t.key in present) >= 0.5 * q.topic_weight


def unit_score(q: Question, unit: Unit) -> float:
    """Weighted term coverage plus a small bonus for question neighbours that stay close in the unit.

    Halved when the unit misses most of the question's topic (a year and a figure alone match
    every table).
    """
    present = unit.key_set
    cov = sum(t.weight for t in q.terms if t.key in present) / q.total_weight
    pos: dict[str, int] = {}
    for i, k in enumerate(unit.keys):
        pos.setdefault(k, i)
    pairs = q.pairs
    close = sum(
        1 for a, b in pairs if a in pos and b in pos and abs(pos[a] - pos[b]) <= _CLOSE_TOKENS
    )
    score = cov + (_CLOSE_BONUS * close / len(pairs) if pairs else 0.0)
    return score if on_topic(q, present) else score * _OFF_TOPIC_FACTOR


def evaluate(q: Question, ref: PageRef, units: list[Unit]) -> PageEval:
    """Match one page: the question weight its words cover and its units scored, best first."""
    page_keys = frozenset().union(*(u.key_set for u in units))
    matched = [t for t in q.terms if t.key in page_keys]
    coverage = sum(t.weight for t in matched) / q.total_weight
    topical = q.topic or q.terms
    specific = any(t in topical and t.kind != "generic" for t in matched)
    scored = sorted(((unit_score(q, u), u) for u in units), key=lambda su: -su[0])
    best = scored[0][0] if scored else 0.0
    return PageEval(ref, coverage, best, specific, scored)


def label(ev: PageEval) -> Label:
    """Useful when one unit matches the question well; irrelevant when the page hardly matches it."""
    if not ev.specific or ev.coverage < IRRELEVANT:
        return "irrelevant"
    if ev.best >= USEFUL:
        return "useful"
    return "unknown"


# Passages (the module docstring).

PASSAGES = 3
NO_ANSWER = "No answer was found in the {n} pages read."


def best_passages(q: Question, units: Iterable[Unit], limit: int = PASSAGES) -> list[Unit]:
    """The ``limit`` units that match the question best (each text once), in score order.

    Ties keep the order the units were given in (pages in reading order), so the choice is
    deterministic.
    """
    scored = sorted(
        ((unit_score(q, u), i, u) for i, u in enumerate(units)), key=lambda s: (-s[0], s[1])
    )
    out: list[Unit] = []
    seen: set[str] = set()
    for score, _, unit in scored:
        fact = unit.fact()
        if score <= 0 or fact in seen:
            continue
        seen.add(fact)
        out.append(unit)
        if len(out) >= limit:
            break
    return out


def where(page: PageRef, several_docs: bool) -> str:
    """A page's citation: "p. 12", or "report.pdf p. 12" when passages come from several documents."""
    return f"{page.doc_id} p. {page.page}" if several_docs else f"p. {page.page}"


def no_answer_text(pages_read: int | None, passages: list[tuple[PageRef, str]]) -> str:
    """The answer text of a question left without a confident answer.

    Says how many pages were read (when known) and quotes the passages that match the
    question best, so a reader can judge, instead of a guessed span.
    """
    head = (
        NO_ANSWER.format(n=pages_read) if pages_read else "No answer was found in the pages read."
    )
    if not passages:
        return head
    several = len({p.doc_id for p, _ in passages}) > 1
    quoted = "\n".join(f"- [{where(p, several)}] {' '.join(text.split())}" for p, text in passages)
    return f"{head} The most relevant passages:\n{quoted}"
