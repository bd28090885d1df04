"""One evaluation as the CLI runs it: every seed, the report over seeds, and optionally the reader map.

Each seed has its own resumable folder ``OUT/seed-<s>`` (a rerun of the same command continues; a
rerun with other settings is refused). The store is opened once and read through a memo
(:mod:`.caching`), since searches are deterministic and every engine, seed and map cell asks the
same questions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.evaluation.configs import EngineConfigs
from llama_index_docmemo.evaluation.cost import DEFAULT_COST_MODEL, token_estimate
from llama_index_docmemo.evaluation.datasets import EvalDataset
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.stopping import StopRule

if TYPE_CHECKING:
    from llama_index_docmemo.evaluation.baselines import EvalEngine
    from llama_index_docmemo.readers.base import Reader
    from llama_index_docmemo.store.base import PageStore


@dataclass
class EvalPlan:
    """Everything one ``docmemo eval`` run needs (see ``docmemo eval --help`` for each field)."""

    dataset: EvalDataset
    engines: list[str]
    configs: EngineConfigs
    seeds: list[int]
    reader: str
    make_reader: Callable[[int], Reader]
    out: Path
    store_path: Path
    split: str = "report"
    scope: str = "document"
    corpus: EvalDataset | None = None
    """With ``scope="corpus"``: the documents the store holds (the whole dataset, both halves),
    while the questions come from ``dataset`` (the split)."""
    stop_mode: str = "never"
    p_early: float = 0.1
    p_miss: float = 0.2
    fn: float = 0.2
    fp: float = 0.05
    llm_model: str | None = None
    reader_map: bool = False
    map_seeds: list[int] = field(default_factory=lambda: [0])
    progress: bool = True
    judge_url: str | None = None
    judge_model: str | None = None
    cost_model: str = DEFAULT_COST_MODEL

    @property
    def simulated(self) -> bool:
        return self.reader == "simulated"

    def stop(self, seed: int) -> StopRule:
        return StopRule(self.stop_mode, self.p_early, self.p_miss, seed)  # type: ignore[arg-type]

    def settings(self, seed: int | None = None) -> dict[str, Any]:
        """What a result folder was filled under (``run.json``); a resume must match it."""
        settings: dict[str, Any] = {
            "dataset": str(self.dataset.root.resolve()),
            "split": self.split,
            "reader": self.reader,
            "k": self.configs.pages_per_round,
            "rounds": self.configs.rounds,
            "fn": self.fn if self.simulated else None,
            "fp": self.fp if self.simulated else None,
            "stop": {"mode": self.stop_mode}
            | (
                {"p_early": self.p_early, "p_miss": self.p_miss}
                if self.stop_mode == "noisy"
                else {}
            ),
            "llm_model": self.llm_model,
            "config": dict(self.configs.overrides),
        }
        settings["scope"] = self.scope
        if seed is not None:
            settings["seed"] = seed
        return settings


def run_seeds(
    plan: EvalPlan,
    engine_names: list[str],
    out: Path,
    make_engines: Callable[[int], Mapping[str, EvalEngine]],
    make_reader: Callable[[int], Reader],
    settings: Callable[[int], dict[str, Any]],
    errors: list[str],
    *,
    keep_traces: bool = True,
) -> dict[int, dict[str, list[QuestionRun]]]:
    """Run ``engine_names`` once per seed into ``out/seed-<s>``; runs[seed][engine]."""
    from llama_index_docmemo.evaluation.runner import check_settings, run_evaluation

    runs: dict[int, dict[str, list[QuestionRun]]] = {}
    for seed in plan.seeds:
        folder = out / f"seed-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        check_settings(folder, settings(seed))
        engines = make_engines(seed)
        runs[seed] = run_evaluation(
            plan.dataset,
            {name: engines[name] for name in engine_names},
            lambda seed=seed: make_reader(seed),
            folder,
            stop=plan.stop(seed),
            progress=plan.progress,
            keep_traces=keep_traces,
            on_error=lambda name, item, exc: errors.append(f"{name} {item.qid}: {exc}"),
        )
    return runs


def run_plan(plan: EvalPlan) -> int:
    """Index, run every seed, write the report, plots and (asked) the reader map; 1 if a run failed."""
    from llama_index_docmemo.evaluation.baselines import DocMemoEvalEngine, build_engines
    from llama_index_docmemo.evaluation.caching import MemoEncoder, MemoStore
    from llama_index_docmemo.evaluation.plots import write_plots
    from llama_index_docmemo.evaluation.report import write_report
    from llama_index_docmemo.evaluation.runner import check_settings
    from llama_index_docmemo.evaluation.setup import engine_factory, ensure_indexed, open_eval_store

    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    check_settings(out, plan.settings())
    store, encoder = open_eval_store(plan.store_path)
    errors: list[str] = []
    try:
        documents = plan.corpus if plan.scope == "corpus" and plan.corpus else plan.dataset
        indexed = ensure_indexed(store, encoder, documents, progress=plan.progress)
        if indexed.indexed or indexed.failed:
            print(indexed.summary(), file=sys.stderr)
        memo_store, memo_encoder = MemoStore(store), MemoEncoder(encoder)
        make = engine_factory(memo_store, memo_encoder, crops=plan.reader == "vlm")

        shared: dict[str, EvalEngine] = {}  # engines that do not depend on the seed, built once

        def make_engines(seed: int) -> dict[str, EvalEngine]:
            built = build_engines(
                [name for name in plan.engines if name not in shared],
                configs=plan.configs,
                seed=seed,
                make_engine=make,
                store=memo_store,
                encoder=memo_encoder,
                data_root=plan.dataset.pdf_dir,
                scope=plan.scope,
            )
            shared.update((n, e) for n, e in built.items() if not isinstance(e, DocMemoEvalEngine))
            return {name: shared.get(name) or built[name] for name in plan.engines}

        runs = run_seeds(
            plan, plan.engines, out, make_engines, plan.make_reader, plan.settings, errors
        )
        report = write_report(
            out,
            dataset=plan.dataset.name,
            reader=plan.reader,
            items=plan.dataset.items,
            runs=runs,
            settings=plan.settings(),
            judge_accuracy=_judge(plan, runs),
            judge=plan.judge_model,
            estimate=token_estimate(plan.cost_model),
            grounding=_grounding(plan, runs),
            siblings=_siblings(plan, store),
        )
        write_plots(report, out)
        if plan.reader_map:
            from llama_index_docmemo.evaluation.reader_map import run_reader_map

            run_reader_map(plan, memo_store, memo_encoder, make, errors)
    finally:
        store.close()
    for line in errors[:20]:
        print(f"docmemo eval: failed {line}", file=sys.stderr)
    print((out / "report.md").read_text(encoding="utf-8"))
    if not plan.simulated:
        rates = report["reader_rates"]
        print(
            f"measured reader rates ({plan.reader}, engine {rates['engine']}): "
            f"fn={_rate(rates['fn'])} over {rates['gold_pages_read']} gold pages read, "
            f"fp={_rate(rates['fp'])} over {rates['other_pages_read']} other pages read"
        )
    return 1 if errors else 0


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _siblings(plan: EvalPlan, store: PageStore) -> dict[str, object] | None:
    """Over the whole store, how many questions another document could answer too
    (:mod:`.siblings`); None in document scope, where no engine sees another document."""
    if plan.scope != "corpus":
        return None
    from llama_index_docmemo.evaluation.siblings import sibling_count
    from llama_index_docmemo.store.scope import PageFilter
    from llama_index_docmemo.types import PageRef

    everything = PageFilter()
    pages = {
        schema.doc_id: [
            (record.ref.page, record.text)
            for record in store.get_pages(
                [PageRef(schema.doc_id, p) for p in range(1, schema.n_pages + 1)], everything
            )
        ]
        for schema in store.list_documents(everything)
    }
    return sibling_count(plan.dataset.items, pages).as_dict()


def _grounding(plan: EvalPlan, runs: dict[int, dict[str, list[QuestionRun]]]) -> Any:
    """Complete-evidence-chain rates (:mod:`.grounding`) with the simulated reader, or None.

    Only for a dataset with gold boxes; the pages read get PyMuPDF layout, cached in ``OUT/crops``
    (a rerun reuses it), and the crop caps of a default :class:`CropPostprocessor`.
    """
    from llama_index_docmemo.evaluation.grounding import grounding_report, has_visual_boxes

    if not plan.simulated or not any(has_visual_boxes(item) for item in plan.dataset.items):
        return None
    import functools

    import pymupdf

    from llama_index_docmemo.postprocessors.crops import CropPostprocessor
    from llama_index_docmemo.types import PageRef

    crops = CropPostprocessor(cache_dir=str(plan.out / "crops"))

    @functools.cache
    def blocks_of(ref: PageRef) -> list[Any]:
        return crops.blocks_for(ref.doc_id, str(plan.dataset.pdf_path(ref.doc_id)), ref.page)

    @functools.cache
    def page_sizes(doc_id: str) -> list[tuple[float, float]]:
        with pymupdf.open(str(plan.dataset.pdf_path(doc_id))) as doc:
            return [(page.rect.width, page.rect.height) for page in doc]

    def page_size(ref: PageRef) -> tuple[float, float]:
        sizes = page_sizes(ref.doc_id)
        return sizes[min(max(ref.page, 1), len(sizes)) - 1]  # a label past the end: the last page's

    return grounding_report(
        runs, plan.dataset.items, blocks_of, page_size, caps=crops.caps, fn=plan.fn, fp=plan.fp
    )


def _judge(plan: EvalPlan, runs: dict[int, dict[str, list[QuestionRun]]]) -> Any:
    """Judged accuracy of the first seed's answers (real readers only), or None.

    The judge is LlamaIndex's ``CorrectnessEvaluator`` on the ``--judge-url`` model, after the
    exact rules of :mod:`.judge`; verdicts are cached in ``OUT/judge.jsonl``.
    """
    if not plan.judge_url:
        return None
    if plan.simulated:
        print(
            "docmemo eval: no judge for the simulated reader (its answers are not real)",
            file=sys.stderr,
        )
        return None
    from llama_index_docmemo.evaluation.judge import AnswerJudge, VerdictCache, judge_runs
    from llama_index_docmemo.llms.openai_compatible import OpenAICompatible

    llm = OpenAICompatible(model=plan.judge_model, api_base=plan.judge_url, multimodal=False)
    first = runs[min(runs)]
    return judge_runs(
        first, plan.dataset.items, AnswerJudge(llm), VerdictCache(plan.out / "judge.jsonl")
    )
