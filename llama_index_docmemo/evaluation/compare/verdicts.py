"""Judging a comparison's answers: correctness with expected answers, pairwise without them.

With an expected answer every engine's answer is judged on its own (:meth:`AnswerJudge.correctness`:
exact rules, then LlamaIndex's ``CorrectnessEvaluator``). Without one, DocMemo's answer is compared
with each other engine's by LlamaIndex's ``PairwiseComparisonEvaluator`` in both orders (a tie when
they disagree); that needs a judge model. Verdicts are cached (a resumed run never asks twice); a
judge that fails leaves the verdict empty, with the reason, and is asked again on the next run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.compare.engines import DOCMEMO
from llama_index_docmemo.evaluation.compare.questions import Question
from llama_index_docmemo.evaluation.compare.records import AnswerRecord
from llama_index_docmemo.evaluation.judge import AnswerJudge, Verdict, VerdictCache

OUTCOME = {"a": "win", "b": "loss", "tie": "tie"}
MIRROR = {"win": "loss", "loss": "win", "tie": "tie"}


def _correctness(
    question: str, expected: str, record: AnswerRecord, judge: AnswerJudge, cache: VerdictCache
) -> dict[str, Any]:
    key = {
        "kind": "correctness",
        "question": question,
        "expected": expected,
        "answer": record.answer,
        "judge": judge.name,
    }
    cached = cache.get(key)
    if cached is not None:
        return cached
    try:
        verdict = judge.correctness(question, expected, record.answer)
    except DocMemoError as exc:  # not cached: the next run asks again
        return asdict(Verdict(None, "judge failed", judge.name, feedback=str(exc)))
    return cache.put(key, verdict)


def _pairwise(
    question: Question,
    ours: AnswerRecord,
    theirs: AnswerRecord,
    judge: AnswerJudge,
    cache: VerdictCache,
) -> dict[str, Any] | None:
    key = {
        "kind": "pairwise",
        "question": question.text,
        "a": ours.answer,
        "b": theirs.answer,
        "judge": judge.name,
    }
    cached = cache.get(key)
    if cached is None:
        try:
            cached = cache.put(key, judge.pairwise(question.text, ours.answer, theirs.answer))
        except DocMemoError as exc:
            ours.pairwise[theirs.engine] = {"result": None, "judge": judge.name, "error": str(exc)}
            return None
    return {**cached, "result": OUTCOME[cached["winner"]]}


def judge_records(
    questions: Sequence[Question],
    engines: Sequence[str],
    records: Mapping[tuple[str, str], AnswerRecord],
    judge: AnswerJudge,
    cache: VerdictCache,
    progress: bool = True,
) -> None:
    """Fill each record's ``correctness`` and ``pairwise`` verdicts."""
    from tqdm.auto import tqdm

    for question in tqdm(questions, disable=not progress, desc="judge", unit="question"):
        answered = {
            name: records[(question.qid, name)]
            for name in engines
            if (question.qid, name) in records and records[(question.qid, name)].error is None
        }
        if question.expected is not None:
            for record in answered.values():
                record.correctness = _correctness(
                    question.text, question.expected, record, judge, cache
                )
            continue
        ours = answered.get(DOCMEMO)
        if ours is None or judge.llm is None:
            continue
        for name, theirs in answered.items():
            if name == DOCMEMO:
                continue
            verdict = _pairwise(question, ours, theirs, judge, cache)
            if verdict is not None:
                ours.pairwise[name] = verdict
                theirs.pairwise[DOCMEMO] = {**verdict, "result": MIRROR[verdict["result"]]}
