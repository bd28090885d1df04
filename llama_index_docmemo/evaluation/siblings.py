"""How many questions another document could answer too (pure): the sibling-filing count.

Over a whole collection, other filings of the same company often print the same figures (a
10-K repeats the year before's statements), so an engine that reads a sibling may hold the
answer while the gold stays the named filing. Gold is not changed; this counts, as a proxy,
the questions whose every gold page is largely reprinted on one page of another document.

A page's *figures* are its numbers of four or more digits that are not years (``1,577``,
``13,233``; not ``2022``, ``12`` or ``5.1%``, which any filing prints). A gold page with at
least :data:`MIN_FIGURES` of them is *reprinted* when one page of another document prints at
least :data:`SHARE` of them; a question is *decidable* when each of its gold pages has enough
figures, and *answerable elsewhere* when each is reprinted (by one other document).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llama_index_docmemo.evaluation.datasets import QAItem

_FIGURE = re.compile(r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+|\d{4,})(?![\d,]*\d)")
MIN_FIGURES = 5
SHARE = 0.5


def page_figures(text: str) -> frozenset[str]:
    """The page's numbers of four or more digits, commas removed, years left out."""
    found = (m.group(0).replace(",", "") for m in _FIGURE.finditer(text))
    return frozenset(f for f in found if not (len(f) == 4 and 1900 <= int(f) <= 2100))


@dataclass(frozen=True)
class SiblingCount:
    """Of ``questions`` page-scored questions, ``decidable`` have figures enough on every gold
    page; ``elsewhere`` maps those another document reprints to that document."""

    questions: int
    decidable: int
    elsewhere: dict[str, str]

    def as_dict(self) -> dict[str, object]:
        return {
            "questions": self.questions,
            "decidable": self.decidable,
            "answerable_elsewhere": len(self.elsewhere),
            "by_question": dict(self.elsewhere),
        }


def _reprints(gold: Sequence[frozenset[str]], pages: Sequence[frozenset[str]]) -> bool:
    return all(any(len(g & p) >= SHARE * len(g) for p in pages) for g in gold)


def sibling_count(
    items: Sequence[QAItem], pages: Mapping[str, Sequence[tuple[int, str]]]
) -> SiblingCount:
    """Count over the page-scored ``items`` against ``pages``: each document's ``(page,
    text)`` pairs."""
    figures = {d: {page: page_figures(text) for page, text in ps} for d, ps in pages.items()}
    scored = [item for item in items if item.scored_on_pages]
    decidable = 0
    elsewhere: dict[str, str] = {}
    for item in scored:
        own = figures.get(item.doc_id, {})
        gold = [own.get(page, frozenset()) for page in item.evidence_pages]
        if not all(len(g) >= MIN_FIGURES for g in gold):
            continue
        decidable += 1
        other = next(
            (
                doc_id
                for doc_id, by_page in figures.items()
                if doc_id != item.doc_id and _reprints(gold, list(by_page.values()))
            ),
            None,
        )
        if other is not None:
            elsewhere[item.qid] = other
    return SiblingCount(len(scored), decidable, elsewhere)
