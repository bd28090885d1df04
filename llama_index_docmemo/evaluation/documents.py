"""Document-level metrics of a question's run (pure): did an engine find the right document?

Over a whole collection an engine can read well inside the wrong filing. Per question:
- ``right_document_round1``: a page of the gold document was read in round 1;
- ``documents_read``: distinct documents among the pages read;
- ``document_f1`` / ``page_f1``: F1 of the evidence (the pages the reader labelled useful)
  against the gold documents / pages, as MADQA defines them (no evidence: 0);
- ``pages_to_first_gold``: pages read before the first gold page (None: never read one).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.stats import bootstrap_ci


def f1(predicted: Collection[object], gold: Collection[object]) -> float:
    """Set F1 of ``predicted`` against ``gold`` (0 when either is empty)."""
    hits = len(set(predicted) & set(gold))
    if not predicted or not gold or not hits:
        return 0.0
    precision, recall = hits / len(set(predicted)), hits / len(set(gold))
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class DocumentScores:
    """One run's document-level metrics."""

    right_document_round1: bool
    documents_read: int
    document_f1: float
    page_f1: float
    pages_to_first_gold: int | None


def document_scores(run: QuestionRun, item: QAItem) -> DocumentScores:
    """The document-level metrics of ``run`` on ``item`` (gold: ``item.doc_id``, ``item.gold``)."""
    first = run.reads[0] if run.reads else []
    order = run.order
    gold = set(item.gold)
    to_first = next((i for i, ref in enumerate(order) if ref in gold), None)
    return DocumentScores(
        right_document_round1=any(ref.doc_id == item.doc_id for ref in first),
        documents_read=len({ref.doc_id for ref in order}),
        document_f1=f1({ref.doc_id for ref in run.useful}, {item.doc_id}),
        page_f1=f1(set(run.useful), gold),
        pages_to_first_gold=to_first,
    )


def _mean_ci(values: Sequence[float]) -> dict[str, object]:
    array = np.asarray(values, dtype=np.float64)
    if not array.size:
        return {"mean": None, "ci": None}
    return {"mean": float(array.mean()), "ci": [float(x) for x in bootstrap_ci(array)]}


def document_summary(
    runs_by_seed: Sequence[Sequence[QuestionRun]], items: Mapping[str, QAItem]
) -> dict[str, object]:
    """Means over the page-scored questions (a question's value: its mean over the seeds),
    with bootstrap intervals over questions; ``pages_to_first_gold`` over the runs that read a
    gold page, with the share that never did."""
    per_question: dict[str, list[DocumentScores]] = {}
    for runs in runs_by_seed:
        for run in runs:
            item = items.get(run.qid)
            if item is not None and item.scored_on_pages:
                per_question.setdefault(run.qid, []).append(document_scores(run, item))
    scores = list(per_question.values())

    def mean_of(field: str) -> list[float]:
        return [float(np.mean([getattr(s, field) for s in qs])) for qs in scores]

    firsts = [s.pages_to_first_gold for qs in scores for s in qs]
    found = [f for f in firsts if f is not None]
    return {
        "n_questions": len(scores),
        "right_document_round1": _mean_ci(mean_of("right_document_round1")),
        "documents_read": _mean_ci(mean_of("documents_read")),
        "document_f1": _mean_ci(mean_of("document_f1")),
        "page_f1": _mean_ci(mean_of("page_f1")),
        "pages_to_first_gold": float(np.mean(found)) if found else None,
        "never_gold": (len(firsts) - len(found)) / len(firsts) if firsts else None,
    }
