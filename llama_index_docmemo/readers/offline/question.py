"""Question analysis: the key terms of a question, their weights, and the kind of answer it asks for."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from llama_index_docmemo.text import tokens, word_key

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
