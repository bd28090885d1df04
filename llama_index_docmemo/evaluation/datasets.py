"""Evaluation datasets: a folder with ``qa.jsonl`` (questions with gold evidence pages) and ``pdfs/``.

Format (one JSON object per line of ``qa.jsonl``; bring your own documents in the same shape)::

    {"qid": "q-001",                      # unique id (used to resume a run)
     "doc": "annual-report.pdf",          # file name inside pdfs/ (QAItem.doc_id)
     "question": "What was the 2023 revenue?",
     "answer": "4.2",                     # gold answer; "Not answerable" when the document lacks it
     "evidence_pages": [12, 13],          # 1-based pages holding the evidence; [] when unanswerable
     "answer_format": "Float",            # optional: Str | Int | Float | List | None (scoring rule)
     "evidence_valid": true}              # optional: false excludes the question from page metrics

Other keys are kept in ``QAItem.extra`` and ignored by the harness.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.types import PageRef

ANSWER_FORMATS = ("Str", "Int", "Float", "List", "None")
Split = Literal["tune", "report"]
SPLITS: tuple[str, ...] = ("tune", "report", "all")
_REQUIRED = ("qid", "doc", "question", "answer", "evidence_pages")


class DatasetError(DocMemoError):
    """The dataset folder or one of its lines does not follow the documented format."""


@dataclass(frozen=True)
class QAItem:
    """One evaluation question with its gold answer and gold evidence pages."""

    qid: str
    doc_id: str  # the file's "doc" field: its name inside pdfs/
    question: str
    answer: str
    evidence_pages: tuple[int, ...]
    answer_format: str | None = None
    evidence_valid: bool = True
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def gold(self) -> frozenset[PageRef]:
        return frozenset(PageRef(self.doc_id, p) for p in self.evidence_pages)

    @property
    def scored_on_pages(self) -> bool:
        """Whether page metrics (recall, all-hit) apply: valid labels and at least one gold page."""
        return self.evidence_valid and bool(self.evidence_pages)


@dataclass
class EvalDataset:
    """The questions of one dataset folder and where their PDFs are."""

    name: str
    root: Path
    items: list[QAItem]

    @property
    def pdf_dir(self) -> Path:
        return self.root / "pdfs"

    @property
    def doc_ids(self) -> list[str]:
        return sorted({item.doc_id for item in self.items})

    def pdf_path(self, doc_id: str) -> Path:
        return self.pdf_dir / doc_id

    def __iter__(self) -> Iterator[QAItem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def split_of(doc_id: str) -> Split:
    """The fixed half a document belongs to: "tune" (defaults may be chosen on it) or "report".

    The rule is the team's, fixed for every dataset: a document is in the tuning half when the
    SHA-256 of its file name (the ``doc`` field, e.g. ``"xyz.pdf"``, UTF-8) is even as an integer.
    It depends on the name only, so the halves never move when questions are added.
    """
    digest = int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest(), 16)
    return "tune" if digest % 2 == 0 else "report"


def select_split(dataset: EvalDataset, split: str) -> EvalDataset:
    """The questions of ``dataset`` whose document is in ``split`` ("tune", "report" or "all")."""
    if split not in SPLITS:
        raise DatasetError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "all":
        return dataset
    items = [item for item in dataset.items if split_of(item.doc_id) == split]
    return EvalDataset(name=dataset.name, root=dataset.root, items=items)


def parse_item(row: dict[str, Any], where: str) -> QAItem:
    """One ``qa.jsonl`` object -> :class:`QAItem`; errors name ``where`` (file:line) and the field."""
    missing = [key for key in _REQUIRED if key not in row]
    if missing:
        raise DatasetError(f"{where}: missing field(s) {', '.join(missing)}")
    pages = row["evidence_pages"]
    valid = bool(row.get("evidence_valid", True))
    if not isinstance(pages, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and (p >= 1 or not valid) for p in pages
    ):
        raise DatasetError(
            f"{where}: field evidence_pages must be a list of 1-based page numbers "
            "(out-of-range labels need evidence_valid: false)"
        )
    fmt = row.get("answer_format")
    if fmt is not None and fmt not in ANSWER_FORMATS:
        raise DatasetError(
            f"{where}: field answer_format is {fmt!r}, expected one of {', '.join(ANSWER_FORMATS)} or null"
        )
    known = set(_REQUIRED) | {"answer_format", "evidence_valid"}
    return QAItem(
        qid=str(row["qid"]),
        doc_id=str(row["doc"]),
        question=str(row["question"]),
        answer=str(row["answer"]),
        evidence_pages=tuple(sorted(set(pages))),
        answer_format=fmt,
        evidence_valid=valid,
        extra={k: v for k, v in row.items() if k not in known},
    )


def jsonl_objects(
    path: Path, error: type[Exception], expected: str
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line, "path:line", object) for every non-blank line of a JSON-lines file; a line that is
    not JSON, or not an object, raises ``error`` naming the file and line."""
    text = path.read_text(encoding="utf-8-sig")
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{line}"
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise error(f"{where}: expected {expected}")
        yield line, where, row


def load_dataset(
    root: str | Path, *, limit: int | None = None, check_pdfs: bool = True
) -> EvalDataset:
    """Read ``root/qa.jsonl`` (and check that every referenced PDF is in ``root/pdfs``).

    Args:
        root: the dataset folder.
        limit: keep only the first ``limit`` questions (quick runs).
        check_pdfs: fail early, naming the file, when a question's PDF is absent.
    """
    root = Path(root)
    qa = root / "qa.jsonl"
    if not qa.is_file():
        raise DatasetError(f"{qa}: not found (a dataset folder holds qa.jsonl and pdfs/)")
    items: list[QAItem] = []
    seen: set[str] = set()
    for _, where, row in jsonl_objects(qa, DatasetError, "a JSON object"):
        item = parse_item(row, where)
        if item.qid in seen:
            raise DatasetError(f"{where}: duplicate qid {item.qid!r}")
        seen.add(item.qid)
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    dataset = EvalDataset(name=root.name, root=root, items=items)
    if check_pdfs:
        absent = [d for d in dataset.doc_ids if not dataset.pdf_path(d).is_file()]
        if absent:
            raise DatasetError(
                f"{dataset.pdf_dir}: {len(absent)} PDF(s) named in {qa} are absent, e.g. {absent[0]}"
            )
    return dataset
