"""Page units: a page's text cut into sentences and table rows, the grain of scoring and quoting."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from llama_index_docmemo.reasoning.offline.question import YEAR
from llama_index_docmemo.text import keys
from llama_index_docmemo.types import PageRef

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
