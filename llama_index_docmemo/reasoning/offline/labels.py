"""Labelling: how well a unit and a page match the question, and the page's useful/irrelevant label."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from llama_index_docmemo.reasoning.offline.question import Question
from llama_index_docmemo.reasoning.offline.units import Unit
from llama_index_docmemo.types import PageRef

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
