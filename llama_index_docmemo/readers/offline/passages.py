"""Page text as the offline reader scores it: units, labels and the passages it shows.

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

from llama_index_docmemo.readers.offline.question import YEAR, Question
from llama_index_docmemo.text import keys
from llama_index_docmemo.types import PageRef

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
