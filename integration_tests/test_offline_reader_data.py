"""The offline reader on real MMLongBench-Doc pages (PyMuPDF text), on the final round.

Each question is shown its gold evidence pages mixed with as many random non-evidence pages (not
next to a gold page), as the last round of a query would show them. Measured with this exact
sampling (the 267 valid questions of the documents with a text layer, 2026-11-30): gold pages
labelled useful 0.241 (96/399), other pages 0.056 (34/608); "unanswerable" on 1 of 207 answerable
questions (one that misspells both names it asks about) and on 17 of 60 unanswerable ones; exact
answers 1 right, 0 wrong. The thresholds leave room for small changes, not for a different reader.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.metrics import answer_correct
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.offline import OfflineReader
from llama_index_docmemo.readers.offline.scoring import analyse
from llama_index_docmemo.text import keys
from llama_index_docmemo.types import PageRef

pymupdf = pytest.importorskip("pymupdf")

pytestmark = [pytest.mark.data, pytest.mark.slow]


def _text_layer_docs(root: Path) -> set[str]:
    rows = [line.split("\t") for line in (root / "docs.tsv").read_text().splitlines()[1:]]
    return {row[0] for row in rows if len(row) > 4 and row[4] == "yes"}


@pytest.fixture(scope="module")
def runs(mmlongbench_dir: Path) -> list[dict]:
    """Each question with the reader's feedback on its gold pages plus as many far pages."""
    docs = _text_layer_docs(mmlongbench_dir)
    items = [json.loads(line) for line in (mmlongbench_dir / "qa.jsonl").read_text().splitlines()]
    items = [i for i in items if i["evidence_valid"] and i["doc"] in docs]
    rng = random.Random(0)
    reader = OfflineReader()
    texts: dict[str, list[str]] = {}
    out = []
    for item in items:
        doc = item["doc"]
        if doc not in texts:
            with pymupdf.open(mmlongbench_dir / "pdfs" / doc) as pdf:
                texts[doc] = [p.get_text() for p in pdf]
        n = len(texts[doc])
        gold = [p for p in item["evidence_pages"] if p <= n]
        far = [p for p in range(1, n + 1) if not gold or min(abs(p - g) for g in gold) > 1]
        other = rng.sample(far, min(max(len(gold), 2), len(far)))
        pages = [PageView(PageRef(doc, p), texts[doc][p - 1]) for p in gold + other]
        q = item["question"]
        fb = reader.read(
            ReaderInput(
                q, q, pages, final_round=True, pages_read_total=len(pages), pages_in_scope=n
            )
        )
        gold_keys = {k for p in gold for k in keys(texts[doc][p - 1])}
        out.append(
            {
                "item": item,
                "gold": gold,
                "other": other,
                "fb": fb,
                "anchors_on_gold": all(t.key in gold_keys for t in analyse(q).distinctive),
            }
        )
    assert len(out) > 250, "expected the dev set's text-layer questions"
    return out


def test_gold_pages_are_labelled_useful_more_often_than_other_pages(runs: list[dict]) -> None:
    counts = {"gold": [0, 0], "other": [0, 0]}  # [labelled useful, shown]
    for run in runs:
        useful = {r.page for r in run["fb"].useful_pages}
        for kind in ("gold", "other"):
            counts[kind][0] += sum(p in useful for p in run[kind])
            counts[kind][1] += len(run[kind])
    gold_rate = counts["gold"][0] / counts["gold"][1]
    other_rate = counts["other"][0] / counts["other"][1]
    assert gold_rate >= 0.18, (gold_rate, other_rate)
    assert gold_rate >= 2.5 * other_rate, (gold_rate, other_rate)


def test_answerable_questions_are_rarely_called_unanswerable(runs: list[dict]) -> None:
    answerable = [r for r in runs if r["item"]["answer_format"] != "None"]
    false_unanswerable = [r for r in answerable if r["fb"].status == "unanswerable"]
    assert len(answerable) > 200
    assert len(false_unanswerable) <= 0.05 * len(answerable), [
        r["item"]["question"] for r in false_unanswerable
    ]
    # the strong-evidence rule: never while the question's anchors are on a gold page shown
    assert not [r for r in false_unanswerable if r["anchors_on_gold"]]


def test_exact_answers_are_right_more_often_than_wrong(runs: list[dict]) -> None:
    verdicts = [
        answer_correct(r["fb"].answer, r["item"]["answer"], r["item"]["answer_format"])
        for r in runs
        if r["fb"].status == "answered" and r["item"]["answer_format"] != "None"
    ]
    right = sum(v is True for v in verdicts)
    wrong = sum(v is False for v in verdicts)
    assert right >= wrong, (right, wrong)


def test_without_an_answer_the_final_round_quotes_passages_with_pages(runs: list[dict]) -> None:
    left = [r for r in runs if r["fb"].status == "need_more"]
    assert left
    for run in left:
        answer = run["fb"].answer
        assert answer and answer.startswith("No answer was found in the")
        shown = {p for p in run["gold"] + run["other"]}
        cited = [int(line.split("p. ")[1].split("]")[0]) for line in answer.splitlines()[1:]]
        assert set(cited) <= shown
