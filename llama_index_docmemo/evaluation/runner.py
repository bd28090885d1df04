"""Run engines over a dataset's questions, resumably: each finished (engine, question) is one JSONL line.

``results.jsonl`` in the output folder holds the runs (pages read per round, answer, cost), ``traces.jsonl``
the DocMemo traces (for heat-maps and analysis), ``run.json`` the settings; a rerun with the same
settings skips what is already there, a rerun with other settings is refused (use another folder).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.baselines import EvalEngine
from llama_index_docmemo.evaluation.datasets import EvalDataset, QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.simulated import SimulatedReader
from llama_index_docmemo.evaluation.stopping import StopControl, StopRule
from llama_index_docmemo.readers.base import Reader
from llama_index_docmemo.types import PageRef

RESULTS = "results.jsonl"
TRACES = "traces.jsonl"
SETTINGS = "run.json"


def run_to_json(run: QuestionRun) -> dict[str, Any]:
    return {
        "engine": run.engine,
        "qid": run.qid,
        "reads": [[[ref.doc_id, ref.page] for ref in round_] for round_ in run.reads],
        "useful": [[ref.doc_id, ref.page] for ref in run.useful],
        "answer": run.answer,
        "status": run.status,
        "stop_reason": run.stop_reason,
        "llm_calls": run.llm_calls,
        "seconds": run.seconds,
    }


def run_from_json(row: Mapping[str, Any]) -> QuestionRun:
    return QuestionRun(
        engine=row["engine"],
        qid=row["qid"],
        reads=[[PageRef(doc_id, int(page)) for doc_id, page in round_] for round_ in row["reads"]],
        answer=row.get("answer"),
        status=row.get("status", ""),
        stop_reason=row.get("stop_reason", ""),
        llm_calls=int(row.get("llm_calls", 0)),
        seconds=float(row.get("seconds", 0.0)),
        useful=[PageRef(doc_id, int(page)) for doc_id, page in row.get("useful", [])],
    )


def load_runs(path: Path) -> list[QuestionRun]:
    """Runs recorded in a ``results.jsonl`` (a line cut short by an interrupted run is dropped)."""
    if not path.is_file():
        return []
    runs: list[QuestionRun] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                runs.append(run_from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
    return runs


def read_settings(path: Path) -> dict[str, Any]:
    """A ``run.json``; one written by 0.2 names its reader ``reasoner``, read as ``reader``."""
    settings = json.loads(path.read_text(encoding="utf-8"))
    if "reasoner" in settings:
        settings.setdefault("reader", settings.pop("reasoner"))
    return settings


def check_settings(out_dir: Path, settings: Mapping[str, Any]) -> None:
    """Write ``run.json``, or refuse to resume a folder filled under other settings."""
    path = out_dir / SETTINGS
    if path.is_file():
        previous = read_settings(path)
        changed = sorted(k for k in settings if k in previous and previous[k] != settings[k])
        if changed:
            raise DocMemoError(
                f"{path}: this folder holds results of another run (different {', '.join(changed)}); "
                "choose another --out or delete it"
            )
        merged = {**previous, **settings}
    else:
        merged = dict(settings)
    path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def prepare_reader(reader: Reader, item: QAItem) -> None:
    """Point a per-question reader at the question (the simulated one and the stop rule need
    its gold pages; no engine sees them)."""
    if isinstance(reader, StopControl):
        reader.set_question(item.gold, key=item.qid)
        reader = reader.inner
    if isinstance(reader, SimulatedReader):
        reader.set_question(item.gold, key=item.qid)


def run_evaluation(
    dataset: EvalDataset,
    engines: Mapping[str, EvalEngine],
    make_reader: Callable[[], Reader],
    out_dir: str | Path,
    *,
    stop: StopRule | None = None,
    progress: bool = True,
    keep_traces: bool = True,
    on_error: Callable[[str, QAItem, Exception], None] | None = None,
) -> dict[str, list[QuestionRun]]:
    """Run every engine on every question, appending to ``out_dir/results.jsonl``; returns all runs.

    Each engine gets its own reader behind one :class:`StopControl` applying ``stop`` (default: the
    fixed budget, no early stop). ``on_error`` (if given) is told about a failed (engine, question)
    and the run goes on; otherwise the error propagates. Finished lines are kept, so an interrupted
    run resumes where it stopped. ``keep_traces=False`` writes no DocMemo traces (reader-map cells).
    """
    from tqdm.auto import tqdm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rule = stop or StopRule()
    done: dict[tuple[str, str], QuestionRun] = {
        (run.engine, run.qid): run for run in load_runs(out / RESULTS)
    }
    readers = {name: StopControl(make_reader(), rule) for name in engines}
    todo = sum(1 for item in dataset for name in engines if (name, item.qid) not in done)
    with (
        (out / RESULTS).open("a", encoding="utf-8") as results,
        (out / TRACES).open("a", encoding="utf-8") as traces,
        tqdm(total=todo, disable=not progress, desc=out.name, unit="run") as bar,
    ):
        for item in dataset:
            for name, engine in engines.items():
                if (name, item.qid) in done:
                    continue
                reader = readers[name]
                prepare_reader(reader, item)
                try:
                    output = engine.run(item, reader)
                except Exception as exc:
                    if on_error is None:
                        raise
                    on_error(name, item, exc)
                    bar.update(1)
                    continue
                done[(name, item.qid)] = output.run
                results.write(json.dumps(run_to_json(output.run)) + "\n")
                results.flush()
                if keep_traces and output.trace is not None:
                    row = {
                        "engine": name,
                        "qid": item.qid,
                        "trace": output.trace.model_dump(mode="json"),
                    }
                    traces.write(json.dumps(row) + "\n")
                    traces.flush()
                bar.update(1)
    return group_runs(done.values(), engines)


def group_runs(runs: Iterable[QuestionRun], engines: Iterable[str]) -> dict[str, list[QuestionRun]]:
    """Runs by engine name, for the engines asked (in their order)."""
    grouped: dict[str, list[QuestionRun]] = {name: [] for name in engines}
    for run in runs:
        if run.engine in grouped:
            grouped[run.engine].append(run)
    return grouped
