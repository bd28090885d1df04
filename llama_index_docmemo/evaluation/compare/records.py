"""One line of ``results.jsonl``: a question answered by one engine, what it cost, its citations and
verdicts.

``results.jsonl`` is written as answers come (so an interrupted run resumes where it stopped) and
rewritten at the end with the verdicts merged in. DocMemo's traces go to ``traces.jsonl`` (the
heat-maps of the HTML report).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llama_index_docmemo.evidence.citations import Citation
from llama_index_docmemo.trace import DocId, QueryTrace
from llama_index_docmemo.types import PageRef

RESULTS = "results.jsonl"
TRACES = "traces.jsonl"
VERDICTS = "judgements.jsonl"


class PageCitation(BaseModel):
    doc_id: DocId
    page: int

    @classmethod
    def of(cls, ref: PageRef) -> PageCitation:
        return cls(doc_id=ref.doc_id, page=ref.page)

    @property
    def ref(self) -> PageRef:
        return PageRef(self.doc_id, self.page)


class AnswerRecord(BaseModel):
    """One (question, engine): the answer, its pages, its cost, its citations, its verdicts.

    ``requests_without_usage`` counts LLM requests whose response carried no token usage (their
    tokens were counted with LlamaIndex's ``Settings.tokenizer``, their images estimated). ``image_tokens`` is the images' share of the prompt as
    the model family's formula estimates it (``llms/image_policy.py``), beside the server's own
    ``prompt_tokens``. ``citations`` are the answer's figures, names and quoted facts, each
    verified or not against the pages read and boxed on its page (:mod:`.citing`). ``error``
    holds why the engine gave no answer.
    """

    qid: str
    question: str
    expected: str | None = None
    engine: str
    answer: str = ""
    cited_pages: list[PageCitation] = Field(default_factory=list)
    read_pages: list[PageCitation] = Field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    images: int = 0
    image_tokens: int = 0
    seconds: float = 0.0
    requests_without_usage: int = 0
    citations: list[Citation] = Field(default_factory=list)
    error: str | None = None
    correctness: dict[str, Any] | None = None  # a judge.Verdict, with expected answers
    pairwise: dict[str, dict[str, Any]] = Field(default_factory=dict)  # other engine -> verdict

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.engine)

    @property
    def figures(self) -> list[Citation]:
        """The citations of the answer's figures (numbers, percentages, dates)."""
        return [c for c in self.citations if c.kind == "figure"]

    @property
    def checked_pages(self) -> list[PageRef]:
        """The pages an answer's claims are checked against: cited, then read."""
        return list(dict.fromkeys([p.ref for p in self.cited_pages + self.read_pages]))


def load_records(path: Path) -> dict[tuple[str, str], AnswerRecord]:
    """Records of a ``results.jsonl`` by (qid, engine); a line cut short by an interruption is dropped."""
    records: dict[tuple[str, str], AnswerRecord] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = AnswerRecord.model_validate_json(line)
            except ValueError:
                continue
            records[record.key] = record
    return records


def append_jsonl(path: Path, row: BaseModel | dict[str, Any]) -> None:
    data = row.model_dump(mode="json") if isinstance(row, BaseModel) else row
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(data) + "\n")


def rewrite_records(path: Path, records: Iterable[AnswerRecord]) -> None:
    """Replace ``path`` with ``records`` in one rename (never half written)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(record.model_dump_json() + "\n")
    temporary.replace(path)


def load_traces(path: Path) -> dict[str, QueryTrace]:
    """DocMemo's traces by question id."""
    traces: dict[str, QueryTrace] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                traces[row["qid"]] = QueryTrace.model_validate(row["trace"])
            except (ValueError, KeyError, TypeError):
                continue
    return traces
