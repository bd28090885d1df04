"""The offline reader: reads page text with lexical rules, no LLM, no I/O.

Honest by construction: "answered" only with a span of the expected type found in a unit that
holds the question's anchors (a number next to the asked metric and year, a date next to the
event: answer extraction, below); "unanswerable" only under the strong-evidence rule below;
otherwise a draft saying "no answer was found in the N pages read" with the most relevant
passages (the loop's final answer when no later round does better).

**Unanswerable**, the strong-evidence rule: the question's anchors are absent from what was read.
A question is called unanswerable only when all of these hold:

1. the document was explored: this is the final round, or at least half of the pages in scope
   have been read;
2. nothing was found: no page of this round was labelled useful and no earlier round left notes;
3. the question names distinctive anchors (years and names; a plain number in a question more
   often points at a figure or a page than at content), and at least ``absent_share`` of their
   weight occurs on none of the pages shown in this round (crops included) nor in any earlier
   note;
4. every page shown this round has text to read (at least ``MIN_PAGE_WORDS`` content words): on a
   slide, a scan or a chart the name may be in the picture, so its absence from the text says
   little. The final round's pages are retrieved with a query led by the still-missing terms, so
   an anchor that the lexical search cannot place on any of them is strong evidence that the
   document does not hold it.

Otherwise the reader says it found no answer and shows the passages that match the question
best (:mod:`.scoring`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llama_index_docmemo.readers.base import (
    EvidenceNote,
    Feedback,
    PageView,
    Reader,
    ReaderInput,
    Status,
)
from llama_index_docmemo.readers.offline.scoring import (
    IRRELEVANT,
    NUMERIC_CELL,
    USEFUL,
    YEAR,
    PageEval,
    Question,
    Term,
    Unit,
    analyse,
    best_passages,
    evaluate,
    label,
    no_answer_text,
    page_units,
    positions,
    unit_score,
)
from llama_index_docmemo.text import key_of, keys, tokens
from llama_index_docmemo.types import PageRef

CONFIDENT = 0.6  # unit score an exact answer must stand on
ABSENT_SHARE = 1.0  # share of the anchors' weight that must be absent for "unanswerable"
_NOTES_PER_PAGE = 2
_REFINED_WORDS = 6


class OfflineReader(Reader):
    """Labels pages and finds answers from page text alone (the embedded default reader).

    Pages are split into sentences and table rows; each is scored by weighted coverage of the
    question's key terms (years, numbers and names weigh more; generic words little) with a bonus
    for terms that stay together. Deterministic and pure: no I/O, no model calls.

    Args:
        absent_share: share of the question's anchor weight (years, numbers, names) that must be
            absent from everything read before the reader calls the question unanswerable
            (the module's rule for "unanswerable"); 1.0 asks that every anchor be absent.
    """

    name = "offline"

    def __init__(self, absent_share: float = ABSENT_SHARE) -> None:
        if not 0.0 < absent_share <= 1.0:
            raise ValueError(f"absent_share must be in (0, 1], got {absent_share}")
        self.absent_share = absent_share

    def read(self, inp: ReaderInput) -> Feedback:
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


def _page_texts(inp: ReaderInput, shown: dict[PageRef, PageView]) -> dict[PageRef, str]:
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


def _refine(q: Question, missing: list[str], inp: ReaderInput) -> str:
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


# Answer extraction: a number, date or name next to the question's terms, and year-to-year
# changes.

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


# The strong-evidence rule for "unanswerable" (the module docstring).

EXPLORED_SHARE = 0.5
MIN_PAGE_WORDS = 60


def explored(inp: ReaderInput) -> bool:
    """Whether the loop is on its final round or has read at least half the pages in scope."""
    if inp.final_round:
        return True
    read = max(inp.pages_read_total, len(inp.pages))
    return inp.pages_in_scope > 0 and read / inp.pages_in_scope >= EXPLORED_SHARE


def absent_anchors(q: Question, seen: frozenset[str]) -> list[Term]:
    """The question's distinctive anchors whose key is not among ``seen``."""
    return [t for t in q.distinctive if t.key not in seen]


def strongly_unanswerable(
    q: Question,
    inp: ReaderInput,
    seen: frozenset[str],
    found_evidence: bool,
    absent_share: float,
    page_words: Sequence[int] = (),
) -> bool:
    """The module docstring's rule for "unanswerable".

    ``seen`` holds the keys of every text read this round and of the earlier notes;
    ``page_words`` the number of content words of each page shown this round.
    """
    anchors = q.distinctive
    if found_evidence or not anchors or not explored(inp):
        return False
    if any(n < MIN_PAGE_WORDS for n in page_words):
        return False
    absent = sum(t.weight for t in absent_anchors(q, seen))
    return absent > 0 and absent >= absent_share * sum(t.weight for t in anchors)
