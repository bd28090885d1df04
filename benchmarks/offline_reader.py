"""How honest and how useful is the offline reader on real documents? (issue 10, item 7)

Runs DocMemo with the offline reader (default configuration: k=5 pages a round, T=3 rounds) on every
question of one half of a dataset, restricted to the question's document, and reports:

- false "unanswerable": status "unanswerable" on a question that has an answer (target <= 5%);
- true "unanswerable": status "unanswerable" on a question without one (gold "Not answerable");
- exact answers: how often the reader claims "answered", and how often such an answer is right
  (MMLongBench-Doc's per-format rules, ``evaluation.metrics.answer_correct``);
- accuracy over answerable questions under the same rules (a "no answer found" text is wrong);
- gold in shown text: the gold answer occurs in the text shown to the user (the exact answer, or
  the passages quoted when there is none), after normalisation; lists need every element;
- the reader's labels against the gold pages: fn = gold pages read but not labelled useful / gold
  pages read; fp = other pages read but labelled useful / other pages read.

Proportions come with 95% Wilson intervals. The split is the team's fixed rule: a document is in the
tuning half when sha256(file name) is even (``split_of``). Choose settings on ``--split tune``,
report ``--split report``.

    python benchmarks/offline_reader.py --data ../shared/data/mmlongbench-doc \
        --store /tmp/mmlb-copy --split report --out runs/offline_reader_report.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from llama_index_docmemo.evaluation.datasets import SPLITS, QAItem, load_dataset, split_of
from llama_index_docmemo.evaluation.metrics import answer_correct
from llama_index_docmemo.evaluation.stats import wilson_interval
from llama_index_docmemo.readers.offline import OfflineReader
from llama_index_docmemo.readers.offline.reader import ABSENT_SHARE
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import QueryTrace


def _norm(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower())
    text = re.sub(r"[^\w\s.%]", " ", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)|%", " ", text)
    return " ".join(text.split())


def _elements(gold: str, answer_format: str | None) -> list[str]:
    if answer_format != "List":
        return [gold]
    try:
        value = json.loads(gold.replace("'", '"'))
    except json.JSONDecodeError:
        value = None
    if isinstance(value, list):
        return [str(v) for v in value]
    return [p for p in re.split(r"[;,\n]", gold.strip("[]")) if p.strip()]


def gold_in_text(gold: str, answer_format: str | None, text: str) -> bool:
    """Whether every element of the gold answer occurs in ``text`` as whole words (numbers by value)."""
    shown = f" {_norm(text)} "
    numbers = {float(n) for n in re.findall(r"\d+(?:\.\d+)?", shown)}
    for element in _elements(gold, answer_format):
        target = _norm(element)
        if not target:
            continue
        if re.fullmatch(r"\d+(?:\.\d+)?", target):
            if float(target) not in numbers:
                return False
        elif f" {target} " not in shown:
            return False
    return True


@dataclass
class QuestionOutcome:
    """One question as the offline reader left it, with what the gold says about it."""

    qid: str
    doc_id: str
    answerable: bool
    answer_format: str | None
    status: str
    answer: str
    correct: bool | None
    gold_shown: bool
    gold_read: int
    gold_read_useful: int
    other_read: int
    other_read_useful: int
    pages_read: int
    seconds: float


def outcome_of(item: QAItem, trace: QueryTrace) -> QuestionOutcome:
    """Score one run against its gold answer and gold pages."""
    read = {(p.doc_id, p.page) for p in trace.pages_read}
    useful = {
        (s.doc_id, s.page) for rnd in trace.rounds if rnd.feedback for s in rnd.feedback.useful
    }
    gold = {(item.doc_id, p) for p in item.evidence_pages} if item.evidence_valid else set()
    gold_read = read & gold
    other_read = read - gold
    answerable = item.answer_format != "None" and bool(item.evidence_pages or item.answer)
    answerable = answerable and item.answer.strip().lower() != "not answerable"
    return QuestionOutcome(
        qid=item.qid,
        doc_id=item.doc_id,
        answerable=answerable,
        answer_format=item.answer_format,
        status=trace.status,
        answer=trace.answer,
        correct=answer_correct(trace.answer, item.answer, item.answer_format),
        gold_shown=answerable and gold_in_text(item.answer, item.answer_format, trace.answer),
        gold_read=len(gold_read),
        gold_read_useful=len(gold_read & useful),
        other_read=len(other_read) if gold else 0,
        other_read_useful=len(other_read & useful) if gold else 0,
        pages_read=len(read),
        seconds=trace.seconds,
    )


def rate(k: int, n: int) -> dict[str, float | int | list[float]]:
    lo, hi = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else 0.0, "ci": [round(lo, 4), round(hi, 4)]}


def summarise(
    outcomes: Iterable[QuestionOutcome],
) -> dict[str, dict[str, float | int | list[float]]]:
    """The report's rates over a set of question outcomes."""
    rows = list(outcomes)
    ans = [o for o in rows if o.answerable]
    unans = [o for o in rows if not o.answerable]
    answered = [o for o in ans if o.status == "answered"]
    scored = [o for o in ans if o.correct is not None]
    no_exact = [o for o in ans if o.status != "answered"]
    return {
        "false_unanswerable": rate(sum(o.status == "unanswerable" for o in ans), len(ans)),
        "true_unanswerable": rate(sum(o.status == "unanswerable" for o in unans), len(unans)),
        "answered": rate(len(answered), len(ans)),
        "exact_precision": rate(
            sum(bool(o.correct) for o in answered if o.correct is not None),
            sum(o.correct is not None for o in answered),
        ),
        "accuracy_answerable": rate(sum(bool(o.correct) for o in scored), len(scored)),
        "gold_in_shown_text": rate(sum(o.gold_shown for o in ans), len(ans)),
        "gold_in_passages": rate(sum(o.gold_shown for o in no_exact), len(no_exact)),
        "reader_fn": rate(
            sum(o.gold_read - o.gold_read_useful for o in ans), sum(o.gold_read for o in ans)
        ),
        "reader_fp": rate(sum(o.other_read_useful for o in ans), sum(o.other_read for o in ans)),
        "pages_read_mean": {"rate": sum(o.pages_read for o in rows) / len(rows) if rows else 0.0},
    }


_ROWS = (
    ("false_unanswerable", "false 'unanswerable' (answerable questions)"),
    ("true_unanswerable", "'unanswerable' on unanswerable questions"),
    ("answered", "exact answer given (answerable questions)"),
    ("exact_precision", "exact answers right (MMLongBench rules)"),
    ("accuracy_answerable", "accuracy, answerable questions"),
    ("gold_in_shown_text", "gold answer in the text shown"),
    ("gold_in_passages", "gold answer in the passages (no exact answer)"),
    ("reader_fn", "reader fn (gold pages read, not useful)"),
    ("reader_fp", "reader fp (other pages read, useful)"),
)


def table(summary: dict[str, dict[str, float | int | list[float]]]) -> str:
    """The summary as a Markdown table."""
    lines = ["| measure | rate | 95% CI | k / n |", "|---|---|---|---|"]
    for key, title in _ROWS:
        r = summary[key]
        lo, hi = r["ci"]  # type: ignore[misc]
        lines.append(f"| {title} | {r['rate']:.3f} | {lo:.3f}-{hi:.3f} | {r['k']} / {r['n']} |")
    lines.append(f"| pages read per question | {summary['pages_read_mean']['rate']:.1f} | | |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, object]:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.evaluation.setup import open_eval_store
    from llama_index_docmemo.query_engine import DocMemoQueryEngine

    dataset = load_dataset(args.data)
    items = [i for i in dataset if args.split == "all" or split_of(i.doc_id) == args.split]
    if args.limit:
        items = items[: args.limit]
    store, encoder = open_eval_store(args.store)
    reader = OfflineReader(absent_share=args.absent_share)
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=encoder,
        reader=reader,
        config=DocMemoConfig(),
        evidence_images=False,
    )
    outcomes: list[QuestionOutcome] = []
    started = time.perf_counter()
    try:
        for n, item in enumerate(items, start=1):
            result = engine.run(item.question, page_filter=PageFilter(doc_ids=(item.doc_id,)))
            outcomes.append(outcome_of(item, result.trace))
            if n % 25 == 0:
                print(f"{n}/{len(items)} questions", file=sys.stderr, flush=True)
    finally:
        store.close()
    summary = summarise(outcomes)
    return {
        "dataset": dataset.name,
        "split": args.split,
        "questions": len(outcomes),
        "absent_share": args.absent_share,
        "seconds": round(time.perf_counter() - started, 1),
        "summary": summary,
        "questions_detail": [asdict(o) for o in outcomes],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="dataset folder (qa.jsonl, pdfs/)")
    parser.add_argument("--store", required=True, help="an indexed store of the dataset (a copy)")
    parser.add_argument("--split", choices=SPLITS, default="report")
    parser.add_argument("--out", default=None, help="JSON report path (default: runs/...)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--absent-share", type=float, default=ABSENT_SHARE)
    args = parser.parse_args(argv)
    report = run(args)
    out = Path(args.out or f"runs/offline_reader_{report['dataset']}_{args.split}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(
        f"offline reader, {report['dataset']}, {args.split} half, {report['questions']} questions"
    )
    print(table(report["summary"]))  # type: ignore[arg-type]
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
