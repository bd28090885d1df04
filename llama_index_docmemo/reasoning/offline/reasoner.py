"""The offline reasoner: reads page text with lexical rules, no LLM, no I/O.

Honest by construction: "answered" only with a span of the expected type found in a unit that
holds the question's anchors (a number next to the asked metric and year, a date next to the
event); "unanswerable" only under the strong-evidence rule of ``absence.py``; otherwise a draft
saying "no answer was found in the N pages read" with the most relevant passages (the loop's
final answer when no later round does better).
"""

from __future__ import annotations

from llama_index_docmemo.reasoning.base import (
    EvidenceNote,
    Feedback,
    PageView,
    Reasoner,
    ReasoningInput,
    Status,
)
from llama_index_docmemo.reasoning.offline.absence import strongly_unanswerable
from llama_index_docmemo.reasoning.offline.extract import anchored, difference, extract
from llama_index_docmemo.reasoning.offline.labels import (
    IRRELEVANT,
    USEFUL,
    PageEval,
    evaluate,
    label,
    unit_score,
)
from llama_index_docmemo.reasoning.offline.passages import (
    best_passages,
    no_answer_text,
)
from llama_index_docmemo.reasoning.offline.question import Question, Term, analyse
from llama_index_docmemo.reasoning.offline.units import Unit, page_units
from llama_index_docmemo.text import keys
from llama_index_docmemo.types import PageRef

CONFIDENT = 0.6  # unit score an exact answer must stand on
ABSENT_SHARE = 1.0  # share of the anchors' weight that must be absent for "unanswerable"
_NOTES_PER_PAGE = 2
_REFINED_WORDS = 6


class OfflineReasoner(Reasoner):
    """Labels pages and finds answers from page text alone (the embedded default reasoner).

    Pages are split into sentences and table rows; each is scored by weighted coverage of the
    question's key terms (years, numbers and names weigh more; generic words little) with a bonus
    for terms that stay together. Deterministic and pure: no I/O, no model calls.

    Args:
        absent_share: share of the question's anchor weight (years, numbers, names) that must be
            absent from everything read before the reader calls the question unanswerable
            (``absence.py``); 1.0 asks that every anchor be absent.
    """

    name = "offline"

    def __init__(self, absent_share: float = ABSENT_SHARE) -> None:
        if not 0.0 < absent_share <= 1.0:
            raise ValueError(f"absent_share must be in (0, 1], got {absent_share}")
        self.absent_share = absent_share

    def reason(self, inp: ReasoningInput) -> Feedback:
        q = analyse(inp.question)
        shown = {p.ref: p for p in inp.pages}
        units = {ref: page_units(ref, text) for ref, text in _page_texts(inp, shown).items()}
        evals = [evaluate(q, ref, page) for ref, page in units.items()]
        labels = {ev.ref: label(ev) for ev in evals} if q.terms else {}
        useful = [r for r, lab in labels.items() if lab == "useful"]
        irrelevant = [r for r, lab in labels.items() if lab == "irrelevant"]

        notes = _notes(evals, labels)
        earlier = [u for n in inp.evidence for u in page_units(n.page, n.fact)]
        pool = [su for ev in evals if labels.get(ev.ref) == "useful" for su in ev.units]
        pool += [(unit_score(q, u), u) for u in earlier]
        pool.sort(key=lambda su: -su[0])
        answer, answer_units, missing_years = _answer(q, pool)
        for u in answer_units:
            note = EvidenceNote(page=u.page, fact=u.fact(), quote=u.quote())
            if u.page in shown and all(n.fact != note.fact for n in notes):
                notes.append(note)

        found = bool(useful or notes or inp.evidence)
        seen = frozenset(k for page in units.values() for u in page for k in u.key_set)
        seen |= frozenset(k for u in earlier for k in u.key_set)
        status: Status
        if answer is not None and found:
            status = "answered"
        elif strongly_unanswerable(
            q,
            inp,
            seen,
            found,
            self.absent_share,
            [sum(len(u.keys) for u in p) for p in units.values()],
        ):
            status, answer = "unanswerable", None
        else:
            # the draft the loop ends with if no later round does better: what was read, and the
            # passages that match the question best (this round's pages and earlier notes)
            status = "need_more"
            shown_units = [u for page in units.values() for u in page]
            passages = best_passages(q, [*earlier, *shown_units])
            answer = no_answer_text(
                inp.pages_read_total or len(inp.pages), [(u.page, u.fact()) for u in passages]
            )
            if inp.final_round:
                for u in passages:
                    note = EvidenceNote(page=u.page, fact=u.fact(), quote=u.quote())
                    if u.page in shown and all(n.fact != note.fact for n in notes):
                        notes.append(note)
        missing: list[str] = []
        refined: str | None = None
        if status == "need_more":
            missing = _missing(q, notes, inp.evidence, missing_years)
            refined = _refine(q, missing, inp)
        return Feedback(
            answer=answer,
            useful_pages=useful,
            irrelevant_pages=irrelevant,
            notes=notes,
            missing=missing,
            refined_query=refined,
            status=status,
        )

    def synthesize(self, question: str, evidence: list[EvidenceNote], draft: str | None) -> str:
        """The draft when there is one, else "no answer found" with the best evidence notes."""
        if draft:
            return draft
        q = analyse(question)
        units = [u for n in evidence for u in page_units(n.page, n.fact)]
        passages = best_passages(q, units)
        return no_answer_text(None, [(u.page, u.fact()) for u in passages])


def _page_texts(inp: ReasoningInput, shown: dict[PageRef, PageView]) -> dict[PageRef, str]:
    """Each shown page's text with the text of its crops appended."""
    texts = {ref: view.text for ref, view in shown.items()}
    for crop in inp.crops:
        if crop.page in texts and crop.text:
            texts[crop.page] = f"{texts[crop.page]}\n{crop.text}"
    return texts


def _notes(evals: list[PageEval], labels: dict[PageRef, str]) -> list[EvidenceNote]:
    """Up to two facts from each useful page: its best unit, and a second one that scores well."""
    notes: list[EvidenceNote] = []
    for ev in evals:
        if labels.get(ev.ref) != "useful":
            continue
        seen: set[str] = set()
        for rank, (score, unit) in enumerate(ev.units[:4]):
            fact = unit.fact()
            if (
                score >= (IRRELEVANT if rank == 0 else USEFUL)
                and fact not in seen
                and len(seen) < _NOTES_PER_PAGE
            ):
                seen.add(fact)
                notes.append(EvidenceNote(page=ev.ref, fact=fact, quote=unit.quote()))
    return notes


def _answer(
    q: Question, pool: list[tuple[float, Unit]]
) -> tuple[str | None, list[Unit], list[Term]]:
    """(confident answer, units it stands on, years still without a value) from the evidence.

    A comparison between years needs a value for two of its years; any other answer needs a
    question that names a year or a name, a unit scoring at least ``CONFIDENT`` that holds every
    anchor of the question, and a span of the expected type there. Questions naming neither
    ("How many steps are there?") are counts or descriptions that a nearby number does not answer,
    and a value computed from others (a gap, a ratio, an average) is not a span of the page.
    """
    if not pool:
        return None, [], list(q.years) if q.comparison else []
    if q.comparison:
        found: dict[str, tuple[str, Unit]] = {}
        for year in q.years:
            for score, unit in pool:
                if score < USEFUL or not anchored(q, unit, (year.surface,)):
                    continue
                span = extract(q, unit, year.surface)
                if span and (span, unit) not in found.values():
                    found[year.surface] = (span, unit)
                    break
        if len(found) >= 2:
            (y1, (s1, u1)), (y2, (s2, u2)) = list(found.items())[:2]
            return difference((y1, s1), (y2, s2)), [u1, u2], []
        missing = [y for y in q.years if y.surface not in found]
        return None, [u for _, u in found.values()], missing
    if not q.specific or q.derived:
        return None, [], []
    years = q.years
    for score, unit in pool:
        if score < CONFIDENT or not anchored(q, unit):
            continue
        span = extract(q, unit, years[0].surface if len(years) == 1 else None)
        if span:
            return span, [unit], []
    return None, [], []


def _missing(
    q: Question, notes: list[EvidenceNote], earlier: list[EvidenceNote], missing_years: list[Term]
) -> list[str]:
    """The question's specific terms that no note holds yet, then years still without a value."""
    covered: set[str] = set()
    for n in [*notes, *earlier]:
        covered.update(keys(n.fact))
    missing = [t for t in q.terms if t.kind != "generic" and t.key not in covered]
    for y in missing_years:
        if y not in missing:
            missing.append(y)
    return [t.surface for t in missing]


def _refine(q: Question, missing: list[str], inp: ReasoningInput) -> str:
    """Missing terms first, then the anchors (or top words) that keep the query on topic."""
    words = list(dict.fromkeys(missing))
    anchors = [t.surface for t in q.terms if t.kind in ("entity", "number")]
    topic = [t.surface for t in q.terms if t.kind == "word"]
    for w in [*anchors, *topic]:
        if w not in words and (len(words) < _REFINED_WORDS or not missing):
            words.append(w)
    if not words:
        words = [t.surface for t in q.terms]
    hint = {"number": "figure", "date": "date", "name": "name", "text": "details"}[q.answer_type]
    refined = " ".join(words)
    norm = {" ".join(keys(inp.question)), " ".join(keys(inp.query)), inp.query.strip().lower()}
    if refined.lower() in norm or " ".join(keys(refined)) in norm or not refined:
        refined = f"{refined} {hint}".strip()
    return refined
