"""What does abstaining on weak evidence buy, and what does it cost? (issue 27)

Runs DocMemo (default configuration, abstention off) on every question of one half of a dataset,
restricted to the question's document, with the simulated reader (labels from the gold pages,
fn 0.2, fp 0.05) and with the offline reader, and keeps each answer with its citations and the
beliefs of the pages read. Every abstention rule of ``config.answer`` (``evidence/citations.py``)
is then applied to the same runs (a rule only reads the finished answer, so one run serves all
rules and thresholds), and per rule it counts, over the answers the engine shows (status
"answered", or the best guess of a loop that ran out of rounds, unless it says it found nothing):

- false answers avoided: answers to unanswerable questions (gold "Not answerable") it turns into
  "not found", out of all such answers;
- wrong answers avoided: wrong answers to answerable questions it turns into "not found";
- true answers lost: right answers to answerable questions it turns into "not found" (right: the
  offline reader's answer passes MMLongBench-Doc's per-format rules; the simulated reader writes
  no answer text, so its "answered", said only once every gold page was recognised, counts as
  right, and its best guesses as wrong).

Proportions come with 95% Wilson intervals; ``net`` is the errors (false and wrong answers)
avoided minus the true answers lost, and the rule with the largest net is the one to choose. Choose the rule on ``--split tune``, report it on
``--split report`` (the team's fixed split: ``evaluation.datasets.split_of``).

    python benchmarks/abstention.py --data ../shared/data/mmlongbench-doc --store /tmp/mmlb-copy \
        --split tune --out runs/abstention_tune.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import get_args

from llama_index_docmemo.evaluation.datasets import SPLITS, QAItem, load_dataset, split_of
from llama_index_docmemo.evaluation.metrics import answer_correct, is_unanswerable_answer
from llama_index_docmemo.evaluation.stats import wilson_interval
from llama_index_docmemo.evidence.citations import AbstainRule, Citation, abstention_reason
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRef

READERS = ("simulated", "offline")
THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9)


@dataclass(frozen=True)
class Answer:
    """One answered question: what the rules read, and what the answer was worth."""

    qid: str
    status: str
    answerable: bool
    right: bool
    citations: list[dict[str, object]]
    evidence: list[tuple[str, int]]
    beliefs: dict[str, float]  # "doc#page" -> posterior mean


def answer_of(item: QAItem, trace: QueryTrace, reader: str) -> Answer | None:
    """The answer ``trace`` shows (see the module docstring), or None when it shows none."""
    if trace.status == "unanswerable" or is_unanswerable_answer(trace.answer):
        return None
    answerable = bool(item.evidence_pages)
    if reader == "simulated":
        right = answerable and trace.status == "answered"
    else:
        right = answerable and bool(answer_correct(trace.answer, item.answer, item.answer_format))
    beliefs = {f"{e.doc_id}#{e.page}": e.score for e in trace.evidence}
    if trace.rounds:
        for state in trace.rounds[-1].beliefs:
            beliefs.setdefault(
                f"{state.doc_id}#{state.page}", state.alpha / (state.alpha + state.beta)
            )
    return Answer(
        qid=item.qid,
        status=trace.status,
        answerable=answerable,
        right=right,
        citations=[c.model_dump(mode="json") for c in trace.citations],
        evidence=[(e.doc_id, e.page) for e in trace.evidence],
        beliefs=beliefs,
    )


def abstains(answer: Answer, rule: AbstainRule, threshold: float) -> bool:
    citations = [Citation.model_validate(c) for c in answer.citations]
    evidence = [PageRef(doc, page) for doc, page in answer.evidence]
    beliefs = {}
    for key, value in answer.beliefs.items():
        doc, _, page = key.rpartition("#")
        beliefs[PageRef(doc, int(page))] = value
    return abstention_reason(rule, citations, evidence, beliefs, threshold) is not None


def rate(k: int, n: int) -> dict[str, object]:
    low, high = wilson_interval(k, n)
    return {"k": k, "n": n, "rate": k / n if n else 0.0, "interval": [low, high]}


def trade_off(answers: Sequence[Answer], rule: AbstainRule, threshold: float) -> dict[str, object]:
    """The three counts of the module docstring for one rule and threshold."""
    false = [a for a in answers if not a.answerable]
    wrong = [a for a in answers if a.answerable and not a.right]
    right = [a for a in answers if a.right]

    def hits(group: Iterable[Answer]) -> int:
        return sum(abstains(a, rule, threshold) for a in group)

    avoided, lost = hits(false) + hits(wrong), hits(right)
    return {
        "rule": rule,
        "threshold": threshold,
        "false_answers_avoided": rate(hits(false), len(false)),
        "wrong_answers_avoided": rate(hits(wrong), len(wrong)),
        "true_answers_lost": rate(lost, len(right)),
        "net": avoided - lost,
    }


def best_rule(rows: Sequence[dict[str, object]]) -> dict[str, object]:
    """The rule with the largest net (errors avoided minus true answers lost; ties: the first,
    "off" before any other): how the default is chosen on the tuning half."""
    return max(rows, key=lambda row: row["net"])  # type: ignore[arg-type,return-value]


def rules() -> list[tuple[AbstainRule, float]]:
    out: list[tuple[AbstainRule, float]] = [("off", 0.0), ("unverified", 0.0)]
    for rule in get_args(AbstainRule):
        if "belief" in rule:
            out += [(rule, t) for t in THRESHOLDS]
    return out


def run_reader(reader: str, items: Sequence[QAItem], store, encoder) -> tuple[list[Answer], int]:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.evaluation.simulated import SimulatedReader
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.readers.offline import OfflineReader

    simulated = SimulatedReader()
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=encoder,
        reader=simulated if reader == "simulated" else OfflineReader(),
        config=DocMemoConfig(),
        evidence_images=False,
    )
    answers: list[Answer] = []
    for n, item in enumerate(items, start=1):
        simulated.set_question(item.gold, key=item.qid)
        result = engine.run(item.question, page_filter=PageFilter(doc_ids=(item.doc_id,)))
        answer = answer_of(item, result.trace, reader)
        if answer is not None:
            answers.append(answer)
        if n % 50 == 0:
            print(f"{reader}: {n}/{len(items)} questions", file=sys.stderr, flush=True)
    return answers, len(items)


def table(report: dict[str, object]) -> str:
    lines = [
        "| reader | rule | threshold | false answers avoided | wrong answers avoided | "
        "true answers lost | net |",
        "|---|---|---|---|---|---|---|",
    ]
    for reader, block in report["readers"].items():  # type: ignore[union-attr]
        for row in block["rules"]:
            cells = [
                f"{row[key]['k']}/{row[key]['n']} ({100 * row[key]['rate']:.0f}% "
                f"[{100 * row[key]['interval'][0]:.0f}, {100 * row[key]['interval'][1]:.0f}])"
                for key in ("false_answers_avoided", "wrong_answers_avoided", "true_answers_lost")
            ]
            lines.append(
                f"| {reader} | {row['rule']} | {row['threshold']:.2f} | "
                + " | ".join(cells)
                + f" | {row['net']:+d} |"
            )
    lines.append("")
    for reader, block in report["readers"].items():  # type: ignore[union-attr]
        best = block["best"]
        lines.append(f"{reader}: best rule on this half: {best['rule']} {best['threshold']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="dataset folder (qa.jsonl, pdfs/)")
    parser.add_argument("--store", required=True, help="an indexed store of the dataset (a copy)")
    parser.add_argument("--split", choices=SPLITS, default="report")
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--out", default=None, help="JSON report path (a .md beside it)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    args = parser.parse_args(argv)
    from llama_index_docmemo.evaluation.setup import open_eval_store

    dataset = load_dataset(args.data)
    items = [i for i in dataset if args.split == "all" or split_of(i.doc_id) == args.split]
    items = items[: args.limit] if args.limit else items
    store, encoder = open_eval_store(args.store)
    started = time.perf_counter()
    report: dict[str, object] = {"dataset": dataset.name, "split": args.split, "readers": {}}
    try:
        for reader in args.readers.split(","):
            answers, n = run_reader(reader, items, store, encoder)
            rows = [trade_off(answers, rule, t) for rule, t in rules()]
            report["readers"][reader] = {  # type: ignore[index]
                "questions": n,
                "unanswerable_questions": sum(not i.evidence_pages for i in items),
                "answers_shown": len(answers),
                "best": best_rule(rows),
                "rules": rows,
                "answers": [asdict(a) for a in answers],
            }
    finally:
        store.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out or f"runs/abstention_{dataset.name}_{args.split}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    text = (
        f"abstention, {dataset.name}, {args.split} half, {len(items)} questions\n\n{table(report)}"
    )
    out.with_suffix(".md").write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
