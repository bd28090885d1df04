"""The LLM reader's measured false-negative / false-positive rates against gold pages, on a real server.

Runs ``docmemo eval --engines docmemo --reader vlm`` in this process (so LlamaIndex's
instrumentation can count the server's tokens), then reads the run's ``traces.jsonl`` against the
dataset's gold evidence pages:

- fn = share of gold pages shown to the reader that it did not label useful;
- fp = share of non-gold pages shown to it that it labelled useful;

the same definitions as the simulated reader's ``fn`` / ``fp``, so a real reader can be placed on
the evaluation's reader map. Also seconds and tokens per round. A report, not a test::

    python benchmarks/reader_llama_cpp.py --data ../shared/data/mmlongbench-doc \\
        --store /tmp/mmlb-store --llm-url http://127.0.0.1:8080/v1 --llm-model smollm2 \\
        --limit 20 --out runs/reader-llama-cpp --text-only --context-window 8192

``--from-run DIR`` recomputes the rates from an existing run folder without running anything
(tokens are then unknown). Questions whose gold labels are invalid (``evidence_valid`` false) are
left out of the rates.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index_docmemo.evaluation.stats import wilson_interval
from llama_index_docmemo.trace import FeedbackRecord, QueryTrace


@dataclass
class TokenCounter:
    """Prompt and completion tokens of every chat request, from LlamaIndex's instrumentation."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, usage: dict[str, Any]) -> None:
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)


def count_tokens(counter: TokenCounter) -> None:
    """Route every LLM chat end event's token usage into ``counter``."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.llm import LLMChatEndEvent

    class _Handler(BaseEventHandler):
        @classmethod
        def class_name(cls) -> str:
            return "DocMemoTokenCounter"

        def handle(self, event: Any, **kwargs: Any) -> None:
            if isinstance(event, LLMChatEndEvent) and event.response is not None:
                counter.add(event.response.additional_kwargs or {})

    get_dispatcher().add_event_handler(_Handler())


@dataclass
class ReaderRates:
    gold_shown: int = 0
    gold_missed: int = 0  # shown, not labelled useful
    other_shown: int = 0
    other_useful: int = 0
    labelled_irrelevant: int = 0
    unlabelled: int = 0
    dropped_labels: int = 0
    rounds: int = 0
    round_seconds: list[float] = field(default_factory=list)
    question_seconds: list[float] = field(default_factory=list)
    questions: int = 0
    statuses: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        fn = self.gold_missed / self.gold_shown if self.gold_shown else math.nan
        fp = self.other_useful / self.other_shown if self.other_shown else math.nan
        return {
            "questions": self.questions,
            "rounds": self.rounds,
            "fn": fn,
            "fn_95ci": wilson_interval(self.gold_missed, self.gold_shown),
            "fp": fp,
            "fp_95ci": wilson_interval(self.other_useful, self.other_shown),
            "gold_pages_shown": self.gold_shown,
            "other_pages_shown": self.other_shown,
            "labelled_irrelevant": self.labelled_irrelevant,
            "left_unlabelled": self.unlabelled,
            "labels_naming_unseen_pages": self.dropped_labels,
            "seconds_per_round_mean": sum(self.question_seconds) / self.rounds
            if self.rounds
            else math.nan,
            "selection_seconds_per_round_median": statistics.median(self.round_seconds)
            if self.round_seconds
            else math.nan,
            "statuses": self.statuses,
        }


def gold_pages(data: Path) -> dict[str, tuple[str, set[int]] | None]:
    """qid -> (doc id, gold pages), or None when the labels are invalid."""
    out: dict[str, tuple[str, set[int]] | None] = {}
    with (data / "qa.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            valid = row.get("evidence_valid", True) is not False
            out[str(row["qid"])] = (row["doc"], set(row["evidence_pages"])) if valid else None
    return out


def reader_rates(run_dir: Path, data: Path) -> ReaderRates:
    """fn / fp of the labels in ``run_dir/traces.jsonl`` (engine "docmemo") against the gold."""
    gold = gold_pages(data)
    rates = ReaderRates()
    with (run_dir / "traces.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("engine") != "docmemo" or gold.get(str(row["qid"])) is None:
                continue
            doc_id, pages = gold[str(row["qid"])]  # type: ignore[misc]
            trace = QueryTrace.model_validate(row["trace"])  # 0.2.0's traces (field "doc") too
            rates.questions += 1
            rates.question_seconds.append(trace.seconds)
            rates.statuses[trace.status] = rates.statuses.get(trace.status, 0) + 1
            for round_ in trace.rounds:
                rates.rounds += 1
                rates.round_seconds.append(round_.seconds)
                feedback = round_.feedback or FeedbackRecord(status="")
                useful = {(p.doc_id, p.page) for p in feedback.useful}
                irrelevant = {(p.doc_id, p.page) for p in feedback.irrelevant}
                rates.dropped_labels += feedback.dropped_labels
                for shown in round_.selected:
                    page = (shown.doc_id, shown.page)
                    is_gold = shown.doc_id == doc_id and shown.page in pages
                    if is_gold:
                        rates.gold_shown += 1
                        rates.gold_missed += page not in useful
                    else:
                        rates.other_shown += 1
                        rates.other_useful += page in useful
                    rates.labelled_irrelevant += page in irrelevant
                    rates.unlabelled += page not in useful and page not in irrelevant
    return rates


def report(rates: ReaderRates, tokens: TokenCounter | None, settings: dict[str, Any]) -> str:
    r = rates.as_dict()
    lines = [
        "# Reader on a real OpenAI-compatible server: measured fn / fp",
        "",
        "```",
        " ".join(settings["command"]),
        "```",
        "",
        f"Server: {settings['llm_url']} (model {settings['llm_model']}); data {settings['data']}; "
        f"{r['questions']} questions with valid gold labels, {r['rounds']} reading rounds.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| fn (gold page shown, not labelled useful) | {r['fn']:.3f} (95% CI {r['fn_95ci'][0]:.3f}-{r['fn_95ci'][1]:.3f}; {rates.gold_missed}/{rates.gold_shown}) |",
        f"| fp (other page shown, labelled useful) | {r['fp']:.3f} (95% CI {r['fp_95ci'][0]:.3f}-{r['fp_95ci'][1]:.3f}; {rates.other_useful}/{rates.other_shown}) |",
        f"| pages left unlabelled / labelled irrelevant | {r['left_unlabelled']} / {r['labelled_irrelevant']} |",
        f"| labels naming pages never shown (dropped) | {r['labels_naming_unseen_pages']} |",
        f"| seconds per round (question wall time / rounds) | {r['seconds_per_round_mean']:.1f} |",
        f"| final statuses | {', '.join(f'{k}: {v}' for k, v in sorted(r['statuses'].items()))} |",
    ]
    if tokens is not None and rates.rounds:
        lines += [
            f"| requests per round (incl. repairs, summaries none) | {tokens.requests / rates.rounds:.2f} |",
            f"| prompt tokens per round | {tokens.prompt_tokens / rates.rounds:.0f} |",
            f"| completion tokens per round | {tokens.completion_tokens / rates.rounds:.0f} |",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="dataset folder (qa.jsonl, pdfs/)")
    parser.add_argument("--out", type=Path, required=True, help="run folder (eval output + report)")
    parser.add_argument("--from-run", action="store_true", help="only recompute from --out")
    parser.add_argument(
        "--store", type=Path, default=None, help="page store (a copy: Edge is single-process)"
    )
    parser.add_argument("--llm-url", default=os.environ.get("DOCMEMO_LLM_URL"))
    parser.add_argument("--llm-model", default=os.environ.get("DOCMEMO_LLM_MODEL"))
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--text-only", action="store_true", help="no page images (a text model)")
    parser.add_argument("--context-window", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=512)
    args = parser.parse_args(argv)

    tokens: TokenCounter | None = None
    command = [sys.executable, *sys.argv] if argv is None else ["reader_llama_cpp.py", *argv]
    if not args.from_run:
        if not args.llm_url or not args.llm_model:
            parser.error("--llm-url and --llm-model are needed (or --from-run)")
        os.environ["DOCMEMO_LLM_MAX_TOKENS"] = str(args.max_tokens)
        if args.text_only:
            os.environ["DOCMEMO_LLM_IMAGES"] = "0"
        if args.context_window:
            os.environ["DOCMEMO_LLM_CONTEXT_WINDOW"] = str(args.context_window)
        tokens = TokenCounter()
        count_tokens(tokens)
        from llama_index_docmemo.cli import main as docmemo

        eval_args = [
            "eval", "--data", str(args.data), "--out", str(args.out), "--engines", "docmemo",
            "--reader", "vlm", "--llm-url", args.llm_url, "--llm-model", args.llm_model,
            "--limit", str(args.limit), "--k", str(args.k), "--rounds", str(args.rounds),
            "--no-progress",
        ]  # fmt: skip
        if args.store:
            eval_args += ["--store", str(args.store)]
        code = docmemo(eval_args)
        if code not in (0, None):
            print(f"docmemo eval exited with {code}", file=sys.stderr)
    rates = reader_rates(args.out, args.data)
    settings = {
        "command": command,
        "llm_url": args.llm_url,
        "llm_model": args.llm_model,
        "data": str(args.data),
    }
    text = report(rates, tokens, settings)
    (args.out / "reader_rates.md").write_text(text, encoding="utf-8")
    summary = {**rates.as_dict(), **settings}
    if tokens is not None:
        summary |= {
            "requests": tokens.requests,
            "prompt_tokens": tokens.prompt_tokens,
            "completion_tokens": tokens.completion_tokens,
        }
    (args.out / "reader_rates.json").write_text(
        json.dumps(summary, indent=2, default=str), encoding="utf-8"
    )
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
