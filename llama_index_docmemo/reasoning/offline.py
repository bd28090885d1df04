"""The offline reasoner: reads page text with lexical rules, no LLM, no I/O.

It is honest by construction: "answered" only with a span found next to the question's key terms
(or, on the final round, the best evidence gathered), "unanswerable" only after most of the
document was read with nothing matching or on the final round with no evidence at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Literal

from llama_index_docmemo.reasoning.base import (
    EvidenceNote,
    Feedback,
    PageView,
    Reasoner,
    ReasoningInput,
    Status,
)
from llama_index_docmemo.types import PageRef

AnswerType = Literal["number", "date", "name", "text"]
TermKind = Literal["year", "number", "entity", "word", "generic"]


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_STOPWORDS = _wordset(
    """a about above according after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each either few for
    from further had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves
    mentioned shown show shows given described stated reported according listed document report page
    pages paper text give tell name named answer question based please"""
)
_GENERIC = _wordset(
    """many much number total amount value values figure figures table chart data information year years
    percentage percent proportion share rate list kind type types main current new one two first
    second last difference change compare compared increase decrease"""
)
_TERM_WEIGHT: dict[str, float] = {
    "year": 2.0,
    "number": 2.0,
    "entity": 1.5,
    "word": 1.0,
    "generic": 0.3,
}
# A few canonical forms so that a question and a page phrased differently still meet.
_CANON = {
    "spent": "spend",
    "expenditur": "spend",
    "expens": "spend",
    "outlay": "spend",
    "invest": "spend",
    "investment": "spend",
    "sale": "revenu",
    "turnover": "revenu",
    "staff": "employe",
    "headcount": "employe",
    "workforce": "employe",
    "personnel": "employe",
    "began": "start",
    "begun": "start",
    "commenc": "start",
    "launch": "start",
    "%": "percent",
    "per cent": "percent",
}
_ALIASES = {"r&d": ("research", "development")}

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9&]*|\d[\d,]*(?:\.\d+)?%?")
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_FULL_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+{_MONTH}\.?,?\s+\d{{4}}|{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|{_MONTH}\.?\s+\d{{4}}|\d{{4}}-\d{{2}}-\d{{2}})\b"
)
_YEAR = re.compile(r"(?<![\d.,])(?:19|20)\d{2}(?![\d.,]\d)")
_NUMBER = re.compile(
    r"(?P<cur>(?:[$€£¥]|\b(?:USD|EUR|GBP|NOK|SEK|CHF|RMB)\b)\s?)?"
    r"(?P<num>(?<![\d.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\d.,])\d+(?:\.\d+)?)"
    r"(?P<unit>\s?%|\s?(?:per ?cent|percent|million|billion|thousand|bn|mn)\b)?"
)
_NAME = re.compile(
    r"\b[A-Z][\w&.'-]*(?:\s+(?:of|and|the|de|for|&)\s+[A-Z][\w&.'-]*|\s+[A-Z][\w&.'-]*)*"
)
_NUMERIC_CELL = re.compile(
    r"^[(\-–−+]?\s?(?:[$€£¥]|USD|EUR|GBP)?\s?\d[\d,]*(?:\.\d+)?\s?(?:%|million|bn|m)?\)?$"
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9(\"“])")
_SCALE = {"thousand": 1e3, "million": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9}

_USEFUL = 0.5
_IRRELEVANT = 0.3
_CONFIDENT = 0.6
_UNANSWERABLE_SHARE = 0.5
_FACT_CHARS = 320


@lru_cache(maxsize=65536)
def _stem(token: str) -> str:
    """Light suffix stripping, applied identically to questions and pages."""
    w = token.lower()
    if w[0].isdigit():
        return w.replace(",", "").rstrip("%")
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, min_len in (("ment", 8), ("ing", 6), ("ed", 5)):
        if w.endswith(suffix) and len(w) >= min_len:
            w = w[: -len(suffix)]
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return _CANON.get(w, w)


@lru_cache(maxsize=65536)
def _token_keys(token: str) -> tuple[str, ...]:
    low = token.lower()
    parts = _ALIASES.get(low, (low,))
    return tuple(_stem(p) for p in parts if p[0].isdigit() or (p not in _STOPWORDS and len(p) > 1))


def _keys(text: str) -> list[str]:
    """Normalised content tokens of ``text``, in order (stopwords dropped)."""
    return [k for tok in _TOKEN.findall(text) for k in _token_keys(tok)]


@dataclass(frozen=True)
class _Term:
    key: str
    surface: str
    kind: TermKind

    @property
    def weight(self) -> float:
        return _TERM_WEIGHT[self.kind]


@dataclass(frozen=True)
class _Question:
    terms: tuple[_Term, ...]
    answer_type: AnswerType
    comparison: bool

    @property
    def total_weight(self) -> float:
        return sum(t.weight for t in self.terms) or 1.0

    @property
    def years(self) -> tuple[_Term, ...]:
        return tuple(t for t in self.terms if t.kind == "year")

    @property
    def anchors(self) -> tuple[_Term, ...]:
        return tuple(t for t in self.terms if t.kind in ("year", "number", "entity"))

    @property
    def key_set(self) -> frozenset[str]:
        return frozenset(t.key for t in self.terms)


def _answer_type(q: str) -> AnswerType:
    low = q.lower()
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


def _analyse(question: str) -> _Question:
    """Key terms of a question, weighted: years, numbers and names count more than generic words."""
    terms: dict[str, _Term] = {}
    first = True
    for m in _TOKEN.finditer(question):
        raw = m.group()
        low = raw.lower()
        entity = not first and (raw[0].isupper() or (len(raw) > 1 and raw.isupper()))
        first = False
        for part in _ALIASES.get(low, (low,)):
            if part in _STOPWORDS or (len(part) < 2 and not part[0].isdigit()):
                continue
            key = _stem(part)
            if raw[0].isdigit():
                kind: TermKind = "year" if _YEAR.fullmatch(raw) else "number"
            elif part in _GENERIC or key in _GENERIC:
                kind = "generic"
            else:
                kind = "entity" if entity else "word"
            if key not in terms or _TERM_WEIGHT[kind] > terms[key].weight:
                terms[key] = _Term(key, raw if raw.lower() not in _ALIASES else part, kind)
    atype = _answer_type(question)
    comparison = (
        atype == "number"
        and sum(1 for t in terms.values() if t.kind == "year") >= 2
        and bool(
            re.search(
                r"\b(change|difference|increase|decrease|grow|growth|compared?)", question.lower()
            )
        )
    )
    return _Question(tuple(terms.values()), atype, comparison)


@dataclass(frozen=True)
class _Unit:
    """A sentence or a table row of one page: the grain at which evidence is scored and quoted."""

    page: PageRef
    text: str
    keys: tuple[str, ...]
    cells: tuple[str, ...] = ()
    header: tuple[str, ...] = ()

    @cached_property
    def key_set(self) -> frozenset[str]:
        return frozenset(self.keys) | frozenset(k for c in self.header for k in _keys(c))

    def fact(self) -> str:
        if self.cells:
            rows = [self.header, self.cells] if self.header else [self.cells]
            return "\n".join("|" + "|".join(r) + "|" for r in rows)
        return self.text if len(self.text) <= _FACT_CHARS else self.text[: _FACT_CHARS - 1] + "…"


def _row_cells(line: str) -> tuple[str, ...] | None:
    s = line.strip()
    if "|" not in s and "\t" not in s and "  " not in s:
        return None
    if s.startswith("|") and s.count("|") >= 3:
        cells = tuple(c.strip() for c in s.strip("|").split("|"))
        return None if all(set(c) <= set("-: ") for c in cells) else cells
    parts = tuple(p for p in re.split(r"\t|\s{2,}", s) if p)
    return parts if len(parts) >= 2 else None


def _rows(lines: list[str]) -> list[tuple[tuple[str, ...], int, int]]:
    """Table rows with their line span: markdown/spaced rows, or a label line then numeric cells."""
    rows: list[tuple[tuple[str, ...], int, int]] = []
    i = 0
    while i < len(lines):
        cells = _row_cells(lines[i])
        if cells:
            rows.append((cells, i, i + 1))
            i += 1
            continue
        j = i + 1
        while j < len(lines) and j - i <= 8 and _NUMERIC_CELL.match(lines[j]):
            j += 1
        label = lines[i]
        if j > i + 1 and len(label) <= 60 and any(ch.isalpha() for ch in label):
            rows.append(((label, *lines[i + 1 : j]), i, j))
            i = j
        else:
            i += 1
    return rows


def _is_header(cells: tuple[str, ...]) -> bool:
    """A row of column heads: years or words, and no other figure."""
    return not any(_NUMERIC_CELL.match(c) and not _YEAR.fullmatch(c.strip()) for c in cells)


def _units(page: PageRef, text: str) -> list[_Unit]:
    """Table rows (with their year header when one precedes them) and the sentences around them."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    units: list[_Unit] = []
    header: tuple[str, ...] = ()
    in_table = [False] * len(lines)
    for cells, start, end in _rows(lines):
        in_table[start:end] = [True] * (end - start)
        if _is_header(cells):
            header = cells
            continue
        row_header = header if header and len(header) in (len(cells), len(cells) - 1) else ()
        joined = " ".join(cells)
        units.append(_Unit(page, joined, tuple(_keys(joined)), cells, row_header))
    prose = " ".join(ln for ln, table in zip(lines, in_table, strict=True) if not table)
    for sentence in _SENTENCE_END.split(prose):
        pieces = [sentence] if len(sentence) <= 400 else _windows(sentence)
        units.extend(_Unit(page, p, tuple(_keys(p))) for p in pieces if p)
    return units


def _windows(text: str, size: int = 300) -> list[str]:
    words = text.split()
    out, cur = [], ""
    for w in words:
        if len(cur) + len(w) + 1 > size and cur:
            out.append(cur)
            cur = ""
        cur = f"{cur} {w}".strip()
    return [*out, cur] if cur else out


@dataclass
class _PageEval:
    view_ref: PageRef
    coverage: float
    best: float
    specific: bool
    units: list[tuple[float, _Unit]] = field(default_factory=list)


def _unit_score(q: _Question, unit: _Unit) -> float:
    """Weighted term coverage plus a small bonus for question bigrams that stay close in the unit."""
    present = unit.key_set
    cov = sum(t.weight for t in q.terms if t.key in present) / q.total_weight
    pos: dict[str, int] = {}
    for i, k in enumerate(unit.keys):
        pos.setdefault(k, i)
    keys = [t.key for t in q.terms if t.kind != "generic"]
    pairs = list(zip(keys, keys[1:], strict=False))
    close = sum(1 for a, b in pairs if a in pos and b in pos and abs(pos[a] - pos[b]) <= 3)
    score = cov + (0.1 * close / len(pairs) if pairs else 0.0)
    return score if _on_topic(q, present) else score * 0.5


def _on_topic(q: _Question, keys: frozenset[str]) -> bool:
    """Whether ``keys`` hold at least half of the question's topic words (years alone are not topic)."""
    topic = [t for t in q.terms if t.kind in ("word", "entity")]
    if not topic:
        return True
    return sum(t.weight for t in topic if t.key in keys) >= 0.5 * sum(t.weight for t in topic)


def _evaluate(q: _Question, ref: PageRef, units: list[_Unit]) -> _PageEval:
    page_keys = frozenset().union(*(u.key_set for u in units))
    matched = [t for t in q.terms if t.key in page_keys]
    coverage = sum(t.weight for t in matched) / q.total_weight
    topical = [t for t in q.terms if t.kind in ("word", "entity")] or q.terms
    specific = any(t in topical and t.kind != "generic" for t in matched)
    scored = sorted(((_unit_score(q, u), u) for u in units), key=lambda su: -su[0])
    best = scored[0][0] if scored else 0.0
    return _PageEval(ref, coverage, best, specific, scored)


def _label(ev: _PageEval) -> Literal["useful", "irrelevant", "unknown"]:
    if not ev.specific or ev.coverage < _IRRELEVANT:
        return "irrelevant"
    if ev.best >= _USEFUL:
        return "useful"
    return "unknown"


def _term_positions(q: _Question, text: str) -> list[int]:
    wanted = q.key_set
    return [m.start() for m in _TOKEN.finditer(text) if _stem(m.group()) in wanted]


def _nearest(cands: list[tuple[int, str]], anchors: list[int]) -> str | None:
    if not cands:
        return None
    if not anchors:
        return cands[0][1]
    return min(cands, key=lambda c: (min(abs(c[0] - a) for a in anchors), c[0]))[1]


def _numbers(text: str, exclude: frozenset[str]) -> list[tuple[int, str]]:
    out = []
    for m in _NUMBER.finditer(text):
        num = m.group("num")
        if (_YEAR.fullmatch(num) and not m.group("unit")) or _stem(num) in exclude:
            continue
        out.append((m.start(), m.group().strip()))
    return out


def _column_value(q: _Question, unit: _Unit, year: str | None) -> str | None:
    """The row's cell under the column the question names (its year, else one of its words)."""
    cells = unit.cells
    if unit.header:
        offset = len(cells) - len(unit.header)
        heads = [
            _stem(h.strip()) if _YEAR.fullmatch(h.strip()) else " ".join(_keys(h))
            for h in unit.header
        ]
        wanted = [_stem(year)] if year else [t.key for t in q.terms if t.kind != "generic"]
        for key in wanted:
            for idx, head in enumerate(heads):
                if idx + offset > 0 and idx + offset < len(cells) and key in head.split():
                    value = cells[idx + offset]
                    return value if _NUMERIC_CELL.match(value) else None
        if year:
            return None
    numeric = [c for c in cells[1:] if _NUMERIC_CELL.match(c) and _stem(c) not in q.key_set]
    return numeric[0] if numeric else None


def _extract(q: _Question, unit: _Unit, year: str | None = None) -> str | None:
    """An answer span of the expected type in ``unit``, nearest to the question's terms."""
    if q.answer_type == "number":
        if unit.cells:
            return _column_value(q, unit, year)
        anchors = [m.start() for m in re.finditer(re.escape(year), unit.text)] if year else []
        return _nearest(_numbers(unit.text, q.key_set), anchors or _term_positions(q, unit.text))
    if q.answer_type == "date":
        cands = [(m.start(), m.group()) for m in _FULL_DATE.finditer(unit.text)]
        if not cands:
            cands = [
                (m.start(), m.group())
                for m in _YEAR.finditer(unit.text)
                if m.group() not in q.key_set
            ]
        return _nearest(cands, _term_positions(q, unit.text))
    if q.answer_type == "name":
        cands = [
            (m.start(), m.group())
            for m in _NAME.finditer(unit.text)
            if m.start() > 0 and not set(_keys(m.group())) <= q.key_set
        ]
        return _nearest(cands, _term_positions(q, unit.text))
    return None


def _anchored(q: _Question, unit: _Unit, years: tuple[_Term, ...] | None = None) -> bool:
    present = unit.key_set
    needed = q.anchors if years is None else tuple(t for t in q.anchors if t.kind != "year") + years
    return all(t.key in present for t in needed)


def _value(span: str) -> tuple[float, int, str, str] | None:
    """(value, decimals, currency, unit) of the first number in ``span``."""
    m = _NUMBER.search(span)
    if not m:
        return None
    num = m.group("num").replace(",", "")
    decimals = len(num.split(".")[1]) if "." in num else 0
    return float(num), decimals, (m.group("cur") or "").strip(), (m.group("unit") or "").strip()


def _difference(first: tuple[str, str], second: tuple[str, str]) -> str:
    """Change from the earlier to the later value, in their shared unit when they share one."""
    (y1, s1), (y2, s2) = sorted([first, second])
    a, b = _value(s1), _value(s2)
    base = f"from {s1} ({y1}) to {s2} ({y2})"
    if not a or not b or a[3].lower() != b[3].lower():
        return base
    decimals = max(a[1], b[1])
    delta = round(b[0] - a[0], decimals)
    if delta == 0:
        return f"unchanged {base}"
    unit = b[3] if b[3] in ("", "%") else f" {b[3]}"
    amount = f"{b[2]} {abs(delta):,.{decimals}f}{unit}".strip()
    return f"{'increased' if delta > 0 else 'decreased'} by {amount}, {base}"


class OfflineReasoner(Reasoner):
    """Labels pages and finds answers from page text alone (the embedded default reasoner).

    Pages are split into sentences and table rows; each is scored by weighted coverage of the
    question's key terms (years, numbers and names weigh more; generic words little) with a bonus
    for terms that stay together. Deterministic and pure: no I/O, no model calls.
    """

    name = "offline"

    def reason(self, inp: ReasoningInput) -> Feedback:
        q = _analyse(inp.question)
        shown = {p.ref: p for p in inp.pages}
        texts = self._page_texts(inp, shown)
        evals = [_evaluate(q, ref, _units(ref, text)) for ref, text in texts.items()]
        labels = {ev.view_ref: _label(ev) for ev in evals} if q.terms else {}
        useful = [r for r, lab in labels.items() if lab == "useful"]
        irrelevant = [r for r, lab in labels.items() if lab == "irrelevant"]

        notes = self._notes(evals, labels)
        earlier = [u for n in inp.evidence for u in _units(n.page, n.fact)]
        pool = [su for ev in evals if labels.get(ev.view_ref) == "useful" for su in ev.units] + [
            (_unit_score(q, u), u) for u in earlier
        ]
        pool.sort(key=lambda su: -su[0])
        answer, answer_units, missing_years = self._answer(q, pool, False)
        confident = answer is not None
        if not confident and inp.final_round:
            # a best-effort draft from the strongest evidence: reported, but not as "answered"
            answer, answer_units, missing_years = self._answer(q, pool, True)
        for u in answer_units:
            note = EvidenceNote(page=u.page, fact=u.fact())
            if u.page in shown and all(n.fact != note.fact for n in notes):
                notes.append(note)

        has_evidence = bool(useful or notes or inp.evidence)
        status: Status
        if confident and has_evidence:
            status = "answered"
        elif not has_evidence and (inp.final_round or self._explored(inp)):
            status, answer = "unanswerable", None
        else:
            status = "need_more"
            answer = answer if inp.final_round and has_evidence else None
        missing: list[str] = []
        refined: str | None = None
        if status == "need_more":
            missing = self._missing(q, notes, inp.evidence, missing_years)
            refined = self._refine(q, missing, inp)
        return Feedback(
            answer=answer,
            useful_pages=useful,
            irrelevant_pages=irrelevant,
            notes=notes,
            missing=missing,
            refined_query=refined,
            status=status,
        )

    @staticmethod
    def _page_texts(inp: ReasoningInput, shown: dict[PageRef, PageView]) -> dict[PageRef, str]:
        texts = {ref: view.text for ref, view in shown.items()}
        for crop in inp.crops:
            if crop.page in texts and crop.text:
                texts[crop.page] = f"{texts[crop.page]}\n{crop.text}"
        return texts

    @staticmethod
    def _explored(inp: ReasoningInput) -> bool:
        read = max(inp.pages_read_total, len(inp.pages))
        return inp.pages_in_scope > 0 and read / inp.pages_in_scope >= _UNANSWERABLE_SHARE

    @staticmethod
    def _notes(evals: list[_PageEval], labels: dict[PageRef, str]) -> list[EvidenceNote]:
        notes: list[EvidenceNote] = []
        for ev in evals:
            if labels.get(ev.view_ref) != "useful":
                continue
            seen: set[str] = set()
            for rank, (score, unit) in enumerate(ev.units[:4]):
                fact = unit.fact()
                if (
                    score >= (_IRRELEVANT if rank == 0 else _USEFUL)
                    and fact not in seen
                    and len(seen) < 2
                ):
                    seen.add(fact)
                    notes.append(EvidenceNote(page=ev.view_ref, fact=fact))
        return notes

    @staticmethod
    def _answer(
        q: _Question, pool: list[tuple[float, _Unit]], final: bool
    ) -> tuple[str | None, list[_Unit], list[_Term]]:
        """(answer, units it stands on, years still without a value) from the scored evidence."""
        if not pool:
            return None, [], list(q.years) if q.comparison else []
        if q.comparison:
            found: dict[str, tuple[str, _Unit]] = {}
            for year in q.years:
                for score, unit in pool:
                    if score < _USEFUL or not _anchored(q, unit, (year,)):
                        continue
                    span = _extract(q, unit, year.surface)
                    if span and (span, unit) not in found.values():
                        found[year.surface] = (span, unit)
                        break
            missing = [y for y in q.years if y.surface not in found]
            if len(found) >= 2:
                (y1, (s1, u1)), (y2, (s2, u2)) = list(found.items())[:2]
                return _difference((y1, s1), (y2, s2)), [u1, u2], []
            if not final:
                return None, [u for _, u in found.values()], missing
        years = q.years
        for score, unit in pool:
            threshold = _USEFUL if final else _CONFIDENT
            if score < threshold or not (final or _anchored(q, unit)):
                continue
            span = _extract(q, unit, years[0].surface if len(years) == 1 else None)
            if span:
                return span, [unit], []
        if final and pool[0][0] >= _IRRELEVANT:
            return pool[0][1].fact(), [pool[0][1]], []
        return None, [], []

    @staticmethod
    def _missing(
        q: _Question,
        notes: list[EvidenceNote],
        earlier: list[EvidenceNote],
        missing_years: list[_Term],
    ) -> list[str]:
        covered: set[str] = set()
        for n in [*notes, *earlier]:
            covered.update(_keys(n.fact))
        missing = [t for t in q.terms if t.kind != "generic" and t.key not in covered]
        for y in missing_years:
            if y not in missing:
                missing.append(y)
        return [t.surface for t in missing]

    @staticmethod
    def _refine(q: _Question, missing: list[str], inp: ReasoningInput) -> str:
        """Missing terms first, then the anchors (or top words) that keep the query on topic."""
        words = list(dict.fromkeys(missing))
        anchors = [t.surface for t in q.terms if t.kind in ("entity", "number")]
        topic = [t.surface for t in q.terms if t.kind == "word"]
        for w in [*anchors, *topic]:
            if w not in words and (len(words) < 6 or not missing):
                words.append(w)
        if not words:
            words = [t.surface for t in q.terms]
        hint = {"number": "figure", "date": "date", "name": "name", "text": "details"}[
            q.answer_type
        ]
        refined = " ".join(words)
        norm = {
            " ".join(_keys(inp.question)),
            " ".join(_keys(inp.query)),
            inp.query.strip().lower(),
        }
        if refined.lower() in norm or " ".join(_keys(refined)) in norm or not refined:
            refined = f"{refined} {hint}".strip()
        return refined
