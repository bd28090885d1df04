"""Optional LLM judge of answers (``--judge-url``): for free-form answers the format rules cannot score.

Talks to any OpenAI-compatible chat server; verdicts are cached in ``judge.jsonl`` so a resumed
evaluation never asks twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun

VERDICTS = "judge.jsonl"
_SCHEMA = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}},
    "required": ["correct"],
    "additionalProperties": False,
}
_PROMPT = (
    "You grade answers to questions about a document. The model answer is correct when it states "
    "the same fact as the gold answer (wording, units and number formatting may differ; a list must "
    "hold the same items). When the gold answer is 'Not answerable', the model answer is correct only "
    "if it says the document does not answer the question.\n\n"
    "Question: {question}\nGold answer: {gold}\nModel answer: {answer}\n\n"
    'Reply with JSON only: {{"correct": true}} or {{"correct": false}}.'
)


class LLMJudge:
    """Asks a chat model whether an answer matches the gold answer.

    Args:
        url: server URL ending in ``/v1``.
        model: served model name.
        api_key: the server's key ("EMPTY" for a local vLLM).
        timeout / max_retries: per request, passed to the ``openai`` client.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        from openai import OpenAI

        self.url = url
        self.model = model
        self._client = OpenAI(
            base_url=url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )

    def judge(self, question: str, gold: str, answer: str) -> bool:
        import openai

        try:
            reply = self._client.chat.completions.create(
                model=self.model,
                temperature=0.0,
                max_tokens=20,
                messages=[
                    {
                        "role": "user",
                        "content": _PROMPT.format(question=question, gold=gold, answer=answer),
                    }
                ],
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "verdict", "schema": _SCHEMA},
                },
            )
        except openai.OpenAIError as exc:
            raise LLMError(f"judge at {self.url} did not answer: {exc}") from exc
        content = (reply.choices[0].message.content or "").strip()
        try:
            verdict = json.loads(content)["correct"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise LLMError(
                f"judge at {self.url} replied without a verdict: {content[:200]!r}"
            ) from exc
        if not isinstance(verdict, bool):
            raise LLMError(f"judge at {self.url} replied a non-boolean verdict: {content[:200]!r}")
        return verdict


def judge_runs(
    runs: Mapping[str, Sequence[QuestionRun]],
    items: Sequence[QAItem],
    out_dir: str | Path,
    judge: LLMJudge,
) -> dict[str, float]:
    """Judge accuracy per engine over every question answered, caching verdicts in ``judge.jsonl``."""
    path = Path(out_dir) / VERDICTS
    cached: dict[tuple[str, str, str], bool] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                cached[(row["engine"], row["qid"], row["answer"])] = bool(row["correct"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    by_qid = {item.qid: item for item in items}
    accuracy: dict[str, float] = {}
    with path.open("a", encoding="utf-8") as fh:
        for engine, engine_runs in runs.items():
            verdicts: list[bool] = []
            for run in engine_runs:
                item = by_qid.get(run.qid)
                if item is None:
                    continue
                answer = run.answer or "Not answerable"
                key = (engine, run.qid, answer)
                if key not in cached:
                    cached[key] = judge.judge(item.question, item.answer, answer)
                    row = {
                        "engine": engine,
                        "qid": run.qid,
                        "answer": answer,
                        "correct": cached[key],
                    }
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                verdicts.append(cached[key])
            if verdicts:
                accuracy[engine] = sum(verdicts) / len(verdicts)
    return accuracy
