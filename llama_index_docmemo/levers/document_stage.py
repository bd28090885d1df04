"""The document stage (pure): how likely each candidate document is to hold a question's evidence.

Over a whole collection a page search scatters: a 10-K's statement pages look like every other
10-K's. Two signals say which document a question is about, and neither needs a model call:
- **content**: the best page score each document reached in the question's search over the
  whole scope;
- **the card**: the words a document is known by (its head: file name, title, the app's
  metadata; its body: first page and outline), matched against the question's words, each word
  weighted by how few of the candidate documents' cards carry it (a company name or a year
  separates filings, "revenue" does not). File names are one field among several, so a
  collection whose names are hashes still has its titles and first pages to go on.

The two are fused into one score per document in [0, 1] (the best at 1), the prior of the
document beliefs (:mod:`llama_index_docmemo.memory.documents`). No I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from llama_index_docmemo.memory.belief import normalise_scores
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.text import keys
from llama_index_docmemo.types import PageHit

_NAME_PARTS = re.compile(r"[_\-.\s/\\]+")
_DATE_STAMP = re.compile(r"(?<![\d])(\d{4})(Q[1-4])", re.IGNORECASE)  # 2023Q2 -> 2023 Q2
FORMS = (
    (re.compile(r"\b10[\s-]?K\b", re.IGNORECASE), "annual"),
    (re.compile(r"\b10[\s-]?Q\b", re.IGNORECASE), "quarterly"),
    (re.compile(r"\bQ[1-4]\b", re.IGNORECASE), "quarterly"),
    (re.compile(r"\b8[\s-]?K\b", re.IGNORECASE), "current"),
)
"""Form types as words (a filing's name, first page and a question spell them "10-K", "10K",
"Annual Report"): match keys drop single letters, so "10-K" and "10-Q" would both be "10"."""


_COMPOUND = re.compile(r"\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{2,}\b")


def naming_keys(text: str) -> set[str]:
    """Match keys of ``text`` (``text.keys``) plus each word of letters and digits whole
    ("3M" is a name; its key alone would be the number 3)."""
    return set(keys(text)) | {f"w:{m.group().lower()}" for m in _COMPOUND.finditer(text)}


def _forms(text: str) -> str:
    for pattern, word in FORMS:
        text = pattern.sub(lambda m, w=word: f"{m.group(0)} {w.capitalize()}", text)
    return text


_CARD_SECTIONS = 20  # outline titles a card keeps


BODY_WEIGHT = 0.5
"""A question word found only in a card's body (first page, outline, summaries) counts this
much of one found in its head (file name, title, the app's metadata): the head names the
document, the body also names what it talks about."""


@dataclass(frozen=True)
class DocumentCard:
    """The words a document is known by, as match keys (``text.keys``): its head (file name,
    title, the app's metadata) and its body (outline, first pages)."""

    doc_id: str
    head: frozenset[str]
    body: frozenset[str]

    @property
    def keys(self) -> frozenset[str]:
        return self.head | self.body


def card_fields(
    schema: DocumentSchema, first_page: str = "", metadata: Mapping[str, object] | None = None
) -> tuple[str, str]:
    """A document's card as (head, body) text: the file name (split at ``_``, ``-``, ``.``),
    title and the app's metadata values; the outline's first titles, the first pages'
    summaries and the first page."""
    name = _DATE_STAMP.sub(r"\1 \2", _NAME_PARTS.sub(" ", schema.doc_id))
    head = [name, schema.title]
    head += [str(v) for v in (metadata or {}).values() if isinstance(v, str | int | float)]
    body = [s.title for s in schema.sections[:_CARD_SECTIONS]]
    body += [schema.page_summaries.get(p, "") for p in (1, 2)]
    body.append(first_page)
    return _forms("\n".join(p for p in head if p)), _forms("\n".join(p for p in body if p))


def make_card(doc_id: str, head: str, body: str) -> DocumentCard:
    """The card of ``doc_id`` whose head and body text are ``head`` and ``body``
    (:func:`card_fields`)."""
    return DocumentCard(doc_id, frozenset(naming_keys(head)), frozenset(naming_keys(body)))


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&'’.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_SENTENCE_END = re.compile(r"[.?!:;]\s*$")
_YEAR = re.compile(r"(19|20)\d\d")


def naming_groups(question: str) -> list[frozenset[str]]:
    """The match keys of each word by which a question names its document, one set a word:
    names (a capital letter inside a sentence, or all capitals: "PepsiCo", "JPM"), years, and
    words of letters and digits ("FY2018", "3M", "Q2") by the word whole or its year, never
    by their letters or digits alone (an "FY" or a "3" is on every report). Numbers that are
    not years ("90 minutes"), sentence-initial words ("What", "Assume") and the question's
    other words describe what is asked, not where."""
    out: dict[frozenset[str], None] = {}
    question = _forms(question)
    for m in _WORD.finditer(question):
        word = m.group()
        initial = not question[: m.start()].strip() or bool(
            _SENTENCE_END.search(question[: m.start()])
        )
        digits, letters = any(c.isdigit() for c in word), any(c.isalpha() for c in word)
        if digits and not letters and not _YEAR.fullmatch(word):
            continue  # a number, not a year
        capital = word[0].isupper() and (not initial or (len(word) > 1 and word.isupper()))
        if not digits and not capital:
            continue  # a word of what is asked
        group = naming_keys(word)
        if digits and letters:
            group = {k for k in group if k.startswith("w:") or _YEAR.fullmatch(k)}
        if group:
            out.setdefault(frozenset(group), None)
    return list(out)


def card_scores(question: str, cards: Iterable[DocumentCard]) -> dict[str, float]:
    """Each card's share of the question's naming words (:func:`naming_groups`), in [0, 1].

    A word weighs log(n / df) (n cards, df of them carrying any of its keys): a company's name
    or a year that few cards carry decides, a word every card carries weighs nothing. Each
    word counts once ("FY2016" is the keys "fy", "2016" and "fy2016": one year, not three); a
    word found only in a card's body counts ``BODY_WEIGHT`` of its weight.
    """
    cards = list(cards)
    n = len(cards)
    weight: dict[frozenset[str], float] = {}
    for group in naming_groups(question):
        df = sum(bool(group & card.keys) for card in cards)
        if df:
            weight[group] = math.log(n / df)
    total = sum(weight.values())
    if total <= 0:
        return {card.doc_id: 0.0 for card in cards}
    return {
        card.doc_id: sum(
            v * (1.0 if g & card.head else BODY_WEIGHT) for g, v in weight.items() if g & card.keys
        )
        / total
        for card in cards
    }


def card_lead(scores: Mapping[str, float], documents: int = 1) -> float:
    """How far the best cards' matches stand apart from the rest: the largest drop from the
    m-th best to the next, m up to ``documents`` (0 with no rest). A question that names its
    document (or two: a company's two filings) puts those cards ahead; one that names none,
    or names what many documents share, leaves the cards level."""
    best = sorted(scores.values(), reverse=True)
    return max(
        (best[m - 1] - best[m] for m in range(1, min(documents, len(best) - 1) + 1)), default=0.0
    )


def page_scores(hits: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Each document's best normalised page score among the (document, score) hits."""
    best: dict[str, float] = {}
    for doc_id, score in hits:
        best[doc_id] = max(best.get(doc_id, 0.0), float(score))
    return best


def hit_scores(hits: Sequence[PageHit]) -> dict[str, float]:
    """Each document's best page score among a search's hits, the scores brought to [0, 1]
    as the loop brings them (:func:`~llama_index_docmemo.memory.belief.normalise_scores`)."""
    normalised = normalise_scores([h.score for h in hits])
    return page_scores((h.record.doc_id, float(c)) for h, c in zip(hits, normalised, strict=True))


def document_scores(
    pages: Mapping[str, float], cards: Mapping[str, float], card_weight: float
) -> dict[str, float]:
    """(1 - w) * best page score + w * card score per document, scaled so the best is 1
    (documents with neither signal get 0)."""
    if not 0.0 <= card_weight <= 1.0:
        raise ValueError(f"card_weight must lie in [0, 1], got {card_weight}")
    docs = list(dict.fromkeys([*pages, *cards]))
    fused = {
        d: (1.0 - card_weight) * pages.get(d, 0.0) + card_weight * cards.get(d, 0.0) for d in docs
    }
    top = max(fused.values(), default=0.0)
    return {d: (s / top if top > 0 else 0.0) for d, s in fused.items()}
