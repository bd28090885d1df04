"""Judging answers through LlamaIndex's evaluators, with exact rules where a rule decides.

- **With an expected answer** (:meth:`AnswerJudge.correctness`): a short numeric expected answer
  ("4.2", "$4.2 million", "12.5%") is decided by the number rule (some number of the answer equals
  it within 1%, a percentage possibly written as a fraction, scale words honoured); "Not
  answerable" by the abstention rule (the answer must say the document does not answer); anything
  else by LlamaIndex's ``CorrectnessEvaluator`` (score 1-5, passing at 4).
- **Without one** (:meth:`AnswerJudge.pairwise`): LlamaIndex's ``PairwiseComparisonEvaluator``
  asked in both orders; an answer wins only when both orders prefer it, anything else is a tie, so
  the judge's position bias cannot decide.

Every verdict names who gave it (``judge``: "rule" or the judge model's name). Verdicts are kept
in a JSONL file (:class:`VerdictCache`) so a resumed run never asks twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import (
    FLOAT_REL_TOL,
    QuestionRun,
    is_unanswerable_answer,
)
from llama_index_docmemo.evidence.matching import number_values, values_match

if TYPE_CHECKING:
    from llama_index.core.evaluation import EvaluationResult
    from llama_index.core.llms import LLM

RULE = "rule"
_SHORT_NUMBER = re.compile(
    r"[-−]?\s?[$€£¥]?\s?\(?\d[\d,]*(?:\.\d+)?\)?\s?"
    r"(?:%|percent|thousand|million|billion|trillion|bn|mn|[kmb])?\.?",
    re.IGNORECASE,
)
_SCORE_LINE = re.compile(
    r"[*_#\s]*(?:(?:overall\s+|final\s+)?score\s*[*_]*\s*[:=]?\s*)?[*_\s]*"
    r"(\d(?:\.\d+)?)\s*(?:/\s*5(?:\.0)?|out\s+of\s+5)?[*_\s]*\.?\s*",
    re.IGNORECASE,
)
"""A line that is a score and nothing else: "4", "4.5", "Score: 4", "**Score:** 4/5"."""
UNPARSEABLE = "unparseable reply"


@dataclass(frozen=True)
class Verdict:
    """Whether an answer matches the expected answer, and who decided.

    ``passing`` is None when nobody could judge: no judge model ("not judged"), or a reply
    holding no score (``method`` "unparseable reply", the reply kept in ``feedback``).
    """

    passing: bool | None
    method: str  # "number rule" | "abstention rule" | "correctness" | "not judged" | UNPARSEABLE
    judge: str  # "rule", or the model that judged
    score: float | None = None
    feedback: str = ""


@dataclass(frozen=True)
class PairwiseVerdict:
    """Which of two answers the judge prefers in both orders; ``winner`` "a", "b" or "tie".

    ``first`` is the judge's choice with answer a shown first, ``second`` with b shown first,
    each "a", "b", "tie" or "invalid" (a reply without a verdict).
    """

    winner: str
    first: str
    second: str
    judge: str


def is_short_number(text: str) -> bool:
    """A bare figure: a number with at most a currency sign, percent sign or scale word."""
    return bool(_SHORT_NUMBER.fullmatch(text.strip())) and bool(number_values(text))


def parse_score(reply: str) -> tuple[float | None, str]:
    """(score 1-5, reasoning) from a correctness reply, or (None, the reply) when it holds no
    score. LlamaIndex's template asks for a line with only the score: only such a line counts
    (a digit inside the reasoning, "31,337 and 4,242", is never a score), and replies whose
    score lines disagree, or give a score outside 1-5, hold none."""
    lines = [line.strip() for line in reply.strip().splitlines()]
    scores = {i: m.group(1) for i, line in enumerate(lines) if (m := _SCORE_LINE.fullmatch(line))}
    values = {float(v) for v in scores.values()}
    if len(values) != 1 or not 1 <= (score := values.pop()) <= 5:
        return None, reply.strip()
    reasoning = "\n".join(line for i, line in enumerate(lines) if i not in scores and line)
    return score, reasoning or reply.strip()


def model_name(llm: LLM) -> str:
    """How an LLM is named in reports: its metadata's model name, else its class."""
    name = getattr(llm.metadata, "model_name", None)
    return str(name) if name and name != "unknown" else type(llm).__name__


class AnswerJudge:
    """Judges answers with LlamaIndex's evaluators on ``llm`` (None: the rules only).

    Args:
        llm: the judge model (any LlamaIndex LLM).
        name: how the judge is named in every verdict (default: the LLM's model name).
        threshold: the correctness score (1-5) that passes.
    """

    def __init__(
        self, llm: LLM | None = None, *, name: str | None = None, threshold: float = 4.0
    ) -> None:
        self.llm = llm
        self.name = name or (model_name(llm) if llm is not None else RULE)
        self.threshold = threshold

    def correctness(self, question: str, expected: str, answer: str) -> Verdict:
        """``answer`` against ``expected``: the rules first, then the correctness evaluator."""
        if is_unanswerable_answer(expected):
            return Verdict(is_unanswerable_answer(answer), "abstention rule", RULE)
        if is_short_number(expected):
            stated = [] if is_unanswerable_answer(answer) else number_values(answer)
            passing = values_match(number_values(expected), stated, FLOAT_REL_TOL)
            return Verdict(passing, "number rule", RULE)
        if self.llm is None:
            return Verdict(None, "not judged", RULE)
        from llama_index.core.evaluation import CorrectnessEvaluator

        evaluator = CorrectnessEvaluator(
            llm=self.llm, score_threshold=self.threshold, parser_function=parse_score
        )
        result = evaluator.evaluate(query=question, response=answer, reference=expected)
        method = "correctness" if result.score is not None else UNPARSEABLE
        return Verdict(result.passing, method, self.name, result.score, result.feedback or "")

    def pairwise(self, question: str, answer_a: str, answer_b: str) -> PairwiseVerdict:
        """Which answer the judge prefers, asked with each shown first."""
        if self.llm is None:
            raise ValueError("pairwise judging needs a judge LLM")
        from llama_index.core.evaluation import PairwiseComparisonEvaluator

        evaluator = PairwiseComparisonEvaluator(llm=self.llm, enforce_consensus=False)
        first = _choice(
            evaluator.evaluate(query=question, response=answer_a, second_response=answer_b)
        )
        second = _swap(
            _choice(evaluator.evaluate(query=question, response=answer_b, second_response=answer_a))
        )
        winner = first if first == second and first in ("a", "b") else "tie"
        return PairwiseVerdict(winner, first, second, self.name)


def _choice(result: EvaluationResult) -> str:
    """The evaluator's preference for the answer shown first ("a"), second ("b"), or neither."""
    if result.invalid_result or result.score is None:
        return "invalid"
    return {1.0: "a", 0.0: "b"}.get(result.score, "tie")


def _swap(choice: str) -> str:
    return {"a": "b", "b": "a"}.get(choice, choice)


class VerdictCache:
    """Verdicts already given, one JSON object a line, keyed by the fields that decide them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._rows: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._rows[self._key(row["key"])] = row["verdict"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line cut short by an interrupted run

    @staticmethod
    def _key(key: Mapping[str, Any]) -> str:
        return json.dumps(key, sort_keys=True)

    def get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._rows.get(self._key(key))

    def put(self, key: Mapping[str, Any], verdict: Verdict | PairwiseVerdict) -> dict[str, Any]:
        row = asdict(verdict)
        self._rows[self._key(key)] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": dict(key), "verdict": row}) + "\n")
        return row


def judge_runs(
    runs: Mapping[str, Sequence[QuestionRun]],
    items: Sequence[QAItem],
    judge: AnswerJudge,
    cache: VerdictCache,
) -> dict[str, float]:
    """``docmemo eval``'s judged accuracy per engine over the answers a verdict was reached for."""
    by_qid = {item.qid: item for item in items}
    accuracy: dict[str, float] = {}
    for engine, engine_runs in runs.items():
        verdicts: list[bool] = []
        for run in engine_runs:
            item = by_qid.get(run.qid)
            if item is None:
                continue
            answer = run.answer or "Not answerable"
            key = {"engine": engine, "qid": run.qid, "answer": answer, "judge": judge.name}
            verdict = cache.get(key) or cache.put(
                key, judge.correctness(item.question, item.answer, answer)
            )
            if verdict["passing"] is not None:
                verdicts.append(bool(verdict["passing"]))
        if verdicts:
            accuracy[engine] = sum(verdicts) / len(verdicts)
    return accuracy
