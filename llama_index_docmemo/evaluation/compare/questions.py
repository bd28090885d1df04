"""A pilot's questions: ``.jsonl``, ``.csv`` or one question a line of ``.txt``, expected answers optional.

- ``.jsonl``: one object a line with ``question`` and optionally ``expected`` (or ``answer``) and
  ``id`` (or ``qid``);
- ``.csv``: a header row naming the same columns;
- ``.txt``: one question a line (blank lines and lines starting with ``#`` skipped), no answers.

A question without an id gets ``q<line>``; ids must be unique (they key the resumable results).
Errors name the file, the line and the field.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.datasets import jsonl_objects

QUESTION_KEYS = ("question",)
EXPECTED_KEYS = ("expected", "expected_answer", "answer")
ID_KEYS = ("id", "qid")


class QuestionsError(DocMemoError):
    """The questions file cannot be read as documented."""


@dataclass(frozen=True)
class Question:
    """One question, with the answer the pilot expects when they know it."""

    qid: str
    text: str
    expected: str | None = None


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = row.get(key)
        if value is not None and str(value).strip():
            return value
    return None


def _question(row: dict[str, Any], line: int, where: str) -> Question:
    text = _first(row, QUESTION_KEYS)
    if text is None:
        raise QuestionsError(f"{where}: no question (field 'question' missing or empty)")
    qid = _first(row, ID_KEYS)
    expected = _first(row, EXPECTED_KEYS)
    return Question(
        qid=str(qid).strip() if qid is not None else f"q{line}",
        text=" ".join(str(text).split()),
        expected=str(expected).strip() if expected is not None else None,
    )


def _rows(path: Path) -> list[tuple[int, str, dict[str, Any]]]:
    """(line, where, row) for every question of the file."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        expected = "a JSON object with a 'question' field"
        return list(jsonl_objects(path, QuestionsError, expected))
    text = path.read_text(encoding="utf-8-sig")
    if suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        columns = [c.strip().lower() for c in reader.fieldnames or []]
        if not any(key in columns for key in QUESTION_KEYS):
            raise QuestionsError(f"{path}: the header row has no 'question' column ({columns})")
        return [
            (line, f"{path}:{line}", {k.strip().lower(): v for k, v in row.items() if k})
            for line, row in enumerate(reader, start=2)
        ]
    if suffix == ".txt":
        return [
            (line, f"{path}:{line}", {"question": raw})
            for line, raw in enumerate(text.splitlines(), start=1)
            if raw.strip() and not raw.lstrip().startswith("#")
        ]
    raise QuestionsError(f"{path}: questions must be a .jsonl, .csv or .txt file")


def load_questions(path: str | Path) -> list[Question]:
    """The questions of ``path`` in file order."""
    path = Path(path)
    if not path.is_file():
        raise QuestionsError(f"{path}: no such questions file")
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for line, where, row in _rows(path):
        question = _question(row, line, where)
        if question.qid in seen:
            raise QuestionsError(
                f"{where}: id {question.qid!r} was already used at {seen[question.qid]}"
            )
        seen[question.qid] = where
        questions.append(question)
    if not questions:
        raise QuestionsError(f"{path}: no questions")
    return questions
