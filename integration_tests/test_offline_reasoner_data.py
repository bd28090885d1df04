"""Sanity check of the offline reasoner on real MMLongBench-Doc pages (PyMuPDF text).

Shown the gold evidence pages mixed with as many random non-evidence pages (not next to a gold
page), it must label the gold pages useful clearly more often than the others. Measured with
this exact sampling: gold 0.238 useful, non-evidence 0.061 (210 questions, 777 pages).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from llama_index_docmemo.reasoning.base import PageView, ReasoningInput
from llama_index_docmemo.reasoning.offline import OfflineReasoner
from llama_index_docmemo.types import PageRef

pymupdf = pytest.importorskip("pymupdf")

pytestmark = [pytest.mark.data, pytest.mark.slow]


def _text_layer_docs(root: Path) -> set[str]:
    rows = [line.split("\t") for line in (root / "docs.tsv").read_text().splitlines()[1:]]
    return {row[0] for row in rows if len(row) > 4 and row[4] == "yes"}


def test_gold_pages_are_labelled_useful_more_often_than_other_pages(mmlongbench_dir: Path) -> None:
    docs = _text_layer_docs(mmlongbench_dir)
    items = [json.loads(line) for line in (mmlongbench_dir / "qa.jsonl").read_text().splitlines()]
    items = [i for i in items if i["evidence_pages"] and i["evidence_valid"] and i["doc"] in docs]
    rng = random.Random(0)
    reasoner = OfflineReasoner()
    texts: dict[str, list[str]] = {}
    counts = {"gold": [0, 0], "other": [0, 0]}  # [labelled useful, shown]
    for item in items:
        doc = item["doc"]
        if doc not in texts:
            with pymupdf.open(mmlongbench_dir / "pdfs" / doc) as pdf:
                texts[doc] = [p.get_text() for p in pdf]
        n = len(texts[doc])
        gold = [p for p in item["evidence_pages"] if p <= n]
        far = [p for p in range(1, n + 1) if min(abs(p - g) for g in gold) > 1]
        other = rng.sample(far, min(len(gold), len(far)))
        pages = [PageView(PageRef(doc, p), texts[doc][p - 1]) for p in gold + other]
        q = item["question"]
        fb = reasoner.reason(
            ReasoningInput(q, q, pages, pages_read_total=len(pages), pages_in_scope=n)
        )
        useful = {r.page for r in fb.useful_pages}
        for kind, group in (("gold", gold), ("other", other)):
            counts[kind][0] += sum(p in useful for p in group)
            counts[kind][1] += len(group)
    assert counts["gold"][1] > 300, "expected the dev set's text-layer questions"
    gold_rate = counts["gold"][0] / counts["gold"][1]
    other_rate = counts["other"][0] / counts["other"][1]
    assert gold_rate >= 0.2, (gold_rate, other_rate)
    assert gold_rate >= 2.5 * other_rate, (gold_rate, other_rate)
    assert gold_rate - other_rate >= 0.12, (gold_rate, other_rate)
