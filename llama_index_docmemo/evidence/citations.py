"""Citations of an answer: each figure, name and quoted fact tied to a page read, verified by code.

Code, not the reader, decides whether a page says what the answer says: a figure or a name of the
answer is *verified* when the text of a page read states it (the rules of :mod:`.matching`),
looked for in the evidence pages first, then in the other pages read, then in the text of their
crops; a reader's quote is verified when the page's text holds it word for word. A figure no page
states but two verified figures of the answer give by a sum, difference, ratio or percent change
(:mod:`.matching`) is verified as ``computed``. What no page read states and no arithmetic gives
stays in the list, ``verified: false``; :func:`answer_suffix` says either in the answer.
Boxes are added later, from the page itself (:mod:`.boxes`); this module is pure.

**Abstention**: when an answer's evidence is too weak to stand by. An answer (or the best guess of
a loop that ran out of rounds) is turned into "not found" plus the best candidate pages when
``rule`` says its evidence is weak:

- ``"unverified"``: no citation of the answer is verified (no figure, name or quote of it is on
  a page read);
- ``"low_belief"``: the pages it cites (the verified citations' pages, else the evidence pages)
  have a posterior mean belief under ``min_belief``, the best of them included;
- ``"unverified_or_low_belief"``: either; ``"off"``: never.

docs/evaluation.md ("Abstention") measures the trade-off (false answers avoided against true
answers lost) on the unanswerable questions of the dev data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from pydantic import BaseModel

from llama_index_docmemo.evidence.matching import (
    Figure,
    NormalText,
    derive,
    find_figures,
    find_names,
    is_bare_year,
    locate_span,
    normalise,
    quote_span,
)
from llama_index_docmemo.types import EvidenceNote, PageRef

How = Literal["text_layer", "ocr_text", "crop_text", "computed", "not_found"]
_LINE_CHARS = 240


@dataclass(frozen=True)
class CropText:
    """A crop of a page read: its box (PDF points, [x0, y0, x1, y1], origin top left) and text."""

    bbox: tuple[float, float, float, float]
    text: str


@dataclass(frozen=True)
class PageText:
    """A page read, as a citation checks it: its text (the text layer, or the OCR text when
    ``ocr``) and its crops."""

    ref: PageRef
    text: str
    ocr: bool = False
    crops: tuple[CropText, ...] = field(default_factory=tuple)

    @cached_property
    def normal(self) -> NormalText:
        """The text as the quote rules compare it, computed once for all the claims and quotes."""
        return normalise(self.text)


class Citation(BaseModel):
    """One figure, name or fact of an answer and the page region that states it.

    ``text`` is the claim as the answer (or, for a fact, the reader's note) writes it; ``quote``
    the page's own words around it, at ``start``:``end`` of the page's text; ``stated`` the page's
    own writing of the figure (what a box is searched for). ``bbox`` is in PDF points
    ([x0, y0, x1, y1], origin top left, PyMuPDF's), None when no box was found. ``how`` says where
    the claim was found; ``box_from`` where the box came from. A ``computed`` figure has no page:
    ``computed`` says how, from which figures of the answer
    (``difference: 248.3 million − 212.5 million``).
    """

    text: str
    kind: Literal["figure", "name", "fact"]
    doc_id: str | None
    page: int | None
    bbox: list[float] | None = None
    quote: str = ""
    verified: bool
    how: How
    box_from: Literal["search_for", "ocr_words", "crop"] | None = None
    start: int | None = None
    end: int | None = None
    stated: str = ""
    answer_span: tuple[int, int] | None = None
    computed: str = ""

    @property
    def ref(self) -> PageRef | None:
        return PageRef(self.doc_id, self.page) if self.doc_id and self.page else None


@dataclass(frozen=True)
class _Claim:
    text: str
    kind: Literal["figure", "name"]
    span: tuple[int, int]
    figure: Figure | None = None


def _claims(answer: str) -> list[_Claim]:
    """The figures of ``answer``, then its names that overlap no figure, in answer order."""
    claims = [_Claim(f.text, "figure", f.span, f) for f in find_figures(answer)]
    taken = [c.span for c in claims]
    for name, span in find_names(answer):
        if not any(span[0] < end and start < span[1] for start, end in taken):
            claims.append(_Claim(name, "name", span))
    return sorted(claims, key=lambda c: c.span)


def _span_in(claim: _Claim, text: str, normal: NormalText | None = None) -> tuple[int, int] | None:
    if claim.figure is not None:
        return locate_span(claim.figure, text)
    return quote_span(claim.text, text, normal)


def line_around(text: str, span: tuple[int, int], limit: int = _LINE_CHARS) -> tuple[int, int]:
    """The line of ``text`` holding ``span`` (cut to about ``limit`` characters around it)."""
    start = text.rfind("\n", 0, span[0]) + 1
    end = text.find("\n", span[1])
    end = len(text) if end < 0 else end
    if end - start > limit:
        start = max(start, span[0] - limit // 2)
        end = min(end, span[1] + limit // 2)
    while start < span[0] and text[start].isspace():
        start += 1
    while end > span[1] and text[end - 1].isspace():
        end -= 1
    return start, end


def _in_quotes(
    claim: _Claim, page: PageText, notes: Sequence[EvidenceNote]
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(claim span, quote span) in the page's text where a reader's quote of the page holds it."""
    for note in notes:
        if note.page != page.ref or not note.quote:
            continue
        quoted = quote_span(note.quote, page.text, page.normal)
        inner = _span_in(claim, page.text[quoted[0] : quoted[1]]) if quoted else None
        if quoted and inner:
            return (quoted[0] + inner[0], quoted[0] + inner[1]), quoted
    return None


def _in_text(claim: _Claim, page: PageText) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(claim span, span of its line) in the page's text."""
    span = _span_in(claim, page.text, page.normal)
    return (span, line_around(page.text, span)) if span else None


def _cite_claim(
    claim: _Claim, pages: Sequence[PageText], notes: Sequence[EvidenceNote]
) -> Citation:
    """The claim where a reader's quote holds it, else where a page's text does, else where a
    crop's text does (with the crop's box), else not found."""
    for found in (lambda p: _in_quotes(claim, p, notes), lambda p: _in_text(claim, p)):
        for page in pages:
            spans = found(page)
            if spans is None:
                continue
            (first, last), (start, end) = spans
            return Citation(
                text=claim.text,
                kind=claim.kind,
                doc_id=page.ref.doc_id,
                page=page.ref.page,
                quote=page.text[start:end],
                verified=True,
                how="ocr_text" if page.ocr else "text_layer",
                start=start,
                end=end,
                stated=page.text[first:last],
                answer_span=claim.span,
            )
    for page in pages:
        for crop in page.crops:
            span = _span_in(claim, crop.text)
            if span is not None:
                start, end = line_around(crop.text, span)
                return Citation(
                    text=claim.text,
                    kind=claim.kind,
                    doc_id=page.ref.doc_id,
                    page=page.ref.page,
                    bbox=list(crop.bbox),
                    quote=crop.text[start:end],
                    verified=True,
                    how="crop_text",
                    box_from="crop",
                    stated=crop.text[span[0] : span[1]],
                    answer_span=claim.span,
                )
    return Citation(
        text=claim.text,
        kind=claim.kind,
        doc_id=None,
        page=None,
        verified=False,
        how="not_found",
        answer_span=claim.span,
    )


def _with_computed(found: Sequence[tuple[_Claim, Citation]]) -> list[Citation]:
    """The claims' citations, each unverified figure that two verified figures of the answer
    compute (:func:`~.arithmetic.derive`) verified as ``computed``."""
    stated = [claim.figure for claim, c in found if c.verified and claim.figure is not None]
    citations = []
    for claim, citation in found:
        derivation = None
        if not citation.verified and claim.figure is not None:
            derivation = derive(claim.figure, stated)
        if derivation is not None:
            update = {"verified": True, "how": "computed", "computed": derivation.formula}
            citation = citation.model_copy(update=update)
        citations.append(citation)
    return citations


def _cite_note(note: EvidenceNote, page: PageText) -> Citation:
    span = quote_span(note.quote, page.text, page.normal)
    return Citation(
        text=note.fact,
        kind="fact",
        doc_id=page.ref.doc_id,
        page=page.ref.page,
        quote=note.quote if span is None else page.text[span[0] : span[1]],
        verified=span is not None,
        how="not_found" if span is None else ("ocr_text" if page.ocr else "text_layer"),
        start=span[0] if span else None,
        end=span[1] if span else None,
        stated=note.quote if span is None else page.text[span[0] : span[1]],
    )


def cite(
    answer: str,
    pages: Sequence[PageText],
    notes: Sequence[EvidenceNote],
    evidence: Sequence[PageRef],
    *,
    claims: bool = True,
) -> list[Citation]:
    """The citations of ``answer``: one per figure and name (when ``claims``: an answer the reader
    stands by), then one per quoted note on an ``evidence`` page whose quote no claim already
    cites. ``pages`` are every page read; the ``evidence`` pages are searched first."""
    rank = {ref: n for n, ref in enumerate(evidence)}
    ordered = sorted(pages, key=lambda p: rank.get(p.ref, len(rank)))
    found = [(c, _cite_claim(c, ordered, notes)) for c in _claims(answer)] if claims else []
    citations = _with_computed(found)
    by_ref = {p.ref: p for p in pages}
    quoted = {(c.ref, c.quote) for c in citations}
    for note in notes:
        page = by_ref.get(note.page)
        if page is None or note.page not in rank or not note.quote.strip():
            continue
        citation = _cite_note(note, page)
        if (citation.ref, citation.quote) not in quoted:
            quoted.add((citation.ref, citation.quote))
            citations.append(citation)
    return citations


def answer_suffix(citations: Sequence[Citation]) -> str:
    """What the answer adds when some of its figures or names are on no page read, or computed
    from its cited figures ("" if neither).

    Written without digits and without "not found": number extraction and the "not answerable"
    phrases of answer checks (``evaluation.metrics``) read the answer as before; the citations
    name the figures.
    """
    missing = [c for c in citations if c.kind != "fact" and not c.verified]
    computed = [c for c in citations if c.how == "computed"]
    notes = []
    if len(missing) > 1:
        notes.append("Unverified: some figures or names of this answer are on no page read.")
    elif missing:
        notes.append(f"Unverified: a {missing[0].kind} of this answer is on no page read.")
    if len(computed) > 1:
        notes.append("Computed: some figures of this answer are computed from its cited figures.")
    elif computed:
        operation = computed[0].computed.split(":", 1)[0]
        notes.append(f"Computed: a figure of this answer is the {operation} of two cited figures.")
    return "".join(f" ({note})" for note in notes)


def with_markers(answer: str, citations: Sequence[Citation], order: Sequence[PageRef]) -> str:
    """``answer`` with ``[n]`` after each verified claim and, at the end, for each cited fact: n is
    the 1-based position of the cited page in ``order`` (the response's ``source_nodes``), as
    LlamaIndex's ``CitationQueryEngine`` numbers its sources. A bare year ("(2023)") labels the
    figures beside it and gets no marker, unless it is the answer's only claim."""
    number: dict[PageRef, int] = {}
    for n, ref in enumerate(order, start=1):
        number.setdefault(ref, n)
    claims = [c for c in citations if c.answer_span is not None]
    labels = [c for c in claims if c.kind == "figure" and is_bare_year(c.text)]
    skipped = {id(c) for c in labels} if len(labels) < len(claims) else set()
    inserts: dict[int, list[int]] = {}
    tail: list[int] = []
    for c in citations:
        n = number.get(c.ref) if c.verified and c.ref and id(c) not in skipped else None
        if n is None:
            continue
        if c.answer_span is not None:
            inserts.setdefault(c.answer_span[1], []).append(n)
        elif n not in tail:
            tail.append(n)
    out = answer
    for at in sorted(inserts, reverse=True):
        marks = "".join(f"[{n}]" for n in dict.fromkeys(inserts[at]))
        out = f"{out[:at]} {marks}{out[at:]}"
    already = {n for ns in inserts.values() for n in ns}
    rest = "".join(f"[{n}]" for n in tail if n not in already)
    return f"{out.rstrip()} {rest}" if rest else out


# Abstention (the module docstring).

AbstainRule = Literal["off", "unverified", "low_belief", "unverified_or_low_belief"]
NOT_FOUND = "Not found: the evidence for an answer is too weak ({reason})."


def cited_pages(citations: Sequence[Citation], evidence: Sequence[PageRef]) -> list[PageRef]:
    """The pages of the verified citations, in order; the evidence pages when there are none."""
    cited = list(dict.fromkeys(c.ref for c in citations if c.verified and c.ref is not None))
    return cited or list(evidence)


def abstention_reason(
    rule: AbstainRule,
    citations: Sequence[Citation],
    evidence: Sequence[PageRef],
    beliefs: Mapping[PageRef, float],
    min_belief: float,
) -> str | None:
    """Why ``rule`` turns the answer into "not found", or None when the answer stands."""
    if rule == "off":
        return None
    if rule in ("unverified", "unverified_or_low_belief") and not any(
        c.verified for c in citations
    ):
        return "no figure, name or quote of the answer is on a page read"
    if rule in ("low_belief", "unverified_or_low_belief"):
        best = max((beliefs.get(r, 0.0) for r in cited_pages(citations, evidence)), default=0.0)
        if best < min_belief:
            return f"the best cited page's belief is {best:.2f}, under {min_belief:.2f}"
    return None


def not_found_text(reason: str, candidates: Sequence[tuple[PageRef, float]]) -> str:
    """The answer of an abstention: why, and the best candidate pages with their beliefs."""
    text = NOT_FOUND.format(reason=reason)
    if candidates:
        listed = ", ".join(f"{r.doc_id} p. {r.page} ({b:.2f})" for r, b in candidates)
        text += f" Best candidate pages: {listed}."
    return text
