"""Evaluation metrics (DESIGN §5): evidence recall and all-hit per round, cost, and answer accuracy.

Pure functions over plain data: the runner records what each engine read, this module scores it.
Page metrics and costs are means over the questions with valid, non-empty gold evidence; the others
are counted as excluded. Accuracy covers every question whose answer format has a rule.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.types import PageRef

FLOAT_REL_TOL = 0.01
_UNANSWERABLE = (
    "not answerable",
    "unanswerable",
    "cannot be answered",
    "can not be answered",
    "not found",
    "no answer",
    "not mentioned",
    "not provided",
    "not stated",
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass
class QuestionRun:
    """What one engine did on one question: the pages read in each round and what it cost."""

    engine: str
    qid: str
    reads: list[list[PageRef]]
    answer: str | None = None
    status: str = ""
    stop_reason: str = ""
    llm_calls: int = 0
    seconds: float = 0.0
    useful: list[PageRef] = field(default_factory=list)  # pages the reader labelled useful

    @property
    def pages_read(self) -> int:
        """Distinct pages read (a re-read useful page counts once)."""
        return len({ref for round_ in self.reads for ref in round_})

    @property
    def rounds(self) -> int:
        return len(self.reads)

    @property
    def order(self) -> list[PageRef]:
        """Distinct pages in the order read (round by round, in each round as shown)."""
        return list(dict.fromkeys(ref for round_ in self.reads for ref in round_))

    def first_pages(self, n: int) -> set[PageRef]:
        """The first ``n`` distinct pages read (all of them when fewer were read)."""
        return set(self.order[:n])


@dataclass
class RoundMetrics:
    round: int
    evidence_recall: float
    all_hit: float


@dataclass
class EngineMetrics:
    """An engine's means over a dataset, in the shape of ``report.json``'s per-engine entry."""

    evidence_recall: float
    all_hit: float
    pages_read: float
    rounds: float
    llm_calls: float
    seconds_per_question: float
    accuracy: float | None
    per_round: list[RoundMetrics] = field(default_factory=list)
    n_questions: int = 0
    n_page_scored: int = 0
    n_excluded: int = 0
    n_accuracy_scored: int = 0


def evidence_recall(read: Collection[PageRef], gold: Collection[PageRef]) -> float:
    """Share of the gold pages among the pages read (1.0 when there is no gold page)."""
    if not gold:
        return 1.0
    return len(set(gold) & set(read)) / len(set(gold))


def all_hit(read: Collection[PageRef], gold: Collection[PageRef]) -> bool:
    """Whether every gold page was read."""
    return set(gold) <= set(read)


def cumulative_reads(reads: Sequence[Sequence[PageRef]], n_rounds: int) -> list[set[PageRef]]:
    """Pages read up to each round 1..n_rounds; a run that stopped early keeps its last set."""
    out: list[set[PageRef]] = []
    seen: set[PageRef] = set()
    for r in range(n_rounds):
        if r < len(reads):
            seen = seen | set(reads[r])
        out.append(seen)
    return out


def _clean_text(text: str) -> str:
    text = text.strip().lower()
    text = re.sub(r"[^\w\s.]", " ", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)
    return " ".join(text.split())


def _to_number(text: str) -> float | None:
    """The number a short answer states: the whole string, else its only number."""
    cleaned = text.strip().lower().replace(",", "")
    cleaned = re.sub(r"[$€£%]", "", cleaned).strip().rstrip(".")
    try:
        value = float(cleaned)
    except ValueError:
        found = _NUMBER.findall(cleaned)
        if len(found) != 1:
            return None
        value = float(found[0])
    return value if math.isfinite(value) else None


def is_unanswerable_answer(text: str | None) -> bool:
    """Whether an answer says the document does not answer the question."""
    if text is None:
        return True
    lowered = text.strip().lower()
    return not lowered or any(phrase in lowered for phrase in _UNANSWERABLE)


def _float_equal(gold: float, pred: float) -> bool:
    """Relative tolerance, accepting a percentage written as a fraction or vice versa."""
    return any(
        math.isclose(candidate, pred, rel_tol=FLOAT_REL_TOL, abs_tol=1e-9)
        for candidate in (gold, gold / 100.0, gold * 100.0)
    )


def _split_list(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("["):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        text = text.strip("[]")
    parts = re.split(r"[;,\n]|\band\b", text)
    return [p.strip().strip("'\"") for p in parts if p.strip().strip("'\"")]


def _element_key(text: str) -> str:
    number = _to_number(text)
    if number is not None and _NUMBER.fullmatch(text.strip().replace(",", "").strip("$%. ")):
        return f"#{number:g}"
    return _clean_text(text)


def answer_correct(pred: str | None, gold: str, answer_format: str | None) -> bool | None:
    """MMLongBench-Doc style rule for one answer; None when the format has no rule (free-form).

    Str: exact match after normalisation (case, punctuation, spacing). Int: the stated number equals
    the gold integer. Float: relative tolerance of 1% (a percentage may be written as a fraction).
    List: the same set of normalised elements. None: the answer says "Not answerable".
    """
    if answer_format == "None":
        return is_unanswerable_answer(pred)
    if answer_format not in ("Str", "Int", "Float", "List"):
        return None
    if pred is None or is_unanswerable_answer(pred):
        return False
    if answer_format == "Int":
        gold_n, pred_n = _to_number(gold), _to_number(pred)
        return gold_n is not None and pred_n is not None and int(gold_n) == pred_n
    if answer_format == "Float":
        gold_n, pred_n = _to_number(gold), _to_number(pred)
        return gold_n is not None and pred_n is not None and _float_equal(gold_n, pred_n)
    if answer_format == "List":
        return {_element_key(g) for g in _split_list(gold)} == {
            _element_key(p) for p in _split_list(pred)
        }
    return _clean_text(pred) == _clean_text(gold)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarize(
    runs: Sequence[QuestionRun],
    items: Mapping[str, QAItem],
    *,
    n_rounds: int,
    score_answers: bool,
) -> EngineMetrics:
    """Aggregate one engine's runs.

    Args:
        runs: one run per question (runs of questions absent from ``items`` are ignored).
        items: the dataset's questions by qid.
        n_rounds: rounds of the per-round curve (runs that stopped early carry their last value).
        score_answers: whether answers are real (False for the simulated reader: accuracy None).
    """
    runs = [run for run in runs if run.qid in items]
    scored = [run for run in runs if items[run.qid].scored_on_pages]
    per_round: list[RoundMetrics] = []
    if scored:
        cumulative = [cumulative_reads(run.reads, n_rounds) for run in scored]
        golds = [items[run.qid].gold for run in scored]
        for r in range(n_rounds):
            per_round.append(
                RoundMetrics(
                    round=r + 1,
                    evidence_recall=_mean(
                        [evidence_recall(c[r], g) for c, g in zip(cumulative, golds, strict=True)]
                    ),
                    all_hit=_mean(
                        [float(all_hit(c[r], g)) for c, g in zip(cumulative, golds, strict=True)]
                    ),
                )
            )
    finals = [{ref for round_ in run.reads for ref in round_} for run in scored]
    golds = [items[run.qid].gold for run in scored]
    verdicts: list[bool] = []
    if score_answers:
        for run in runs:
            item = items[run.qid]
            # A run that ended without an answer ("no answer found in the pages read") abstained:
            # it earns nothing, not even on an unanswerable question, whose credit needs a verdict.
            abstained = run.status == "need_more"
            verdict = answer_correct(
                None if abstained else run.answer, item.answer, item.answer_format
            )
            if abstained and verdict is not None:
                verdict = False
            if verdict is not None:
                verdicts.append(verdict)
    return EngineMetrics(
        evidence_recall=_mean([evidence_recall(f, g) for f, g in zip(finals, golds, strict=True)]),
        all_hit=_mean([float(all_hit(f, g)) for f, g in zip(finals, golds, strict=True)]),
        pages_read=_mean([run.pages_read for run in scored]),
        rounds=_mean([run.rounds for run in scored]),
        llm_calls=_mean([run.llm_calls for run in scored]),
        seconds_per_question=_mean([run.seconds for run in scored]),
        accuracy=_mean([float(v) for v in verdicts]) if verdicts else None,
        per_round=per_round,
        n_questions=len(runs),
        n_page_scored=len(scored),
        n_excluded=len(runs) - len(scored),
        n_accuracy_scored=len(verdicts),
    )
