"""Reader-quality map: where, in reader error rates, DocMemo gains over the symmetric baselines.

For every cell of a grid of simulated reader error rates (false negatives x false positives), run
``docmemo``, ``static-paged`` and ``neighbours`` with the simulated reader and the run's stop rule, and
record DocMemo's all-hit after T*k pages minus each baseline's (paired, with a bootstrap interval).
A real reader's measured fn / fp (printed by ``--reader offline`` / ``vlm`` runs) places it on the map.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.evaluation.curves import SeedRuns, paired
from llama_index_docmemo.evaluation.datasets import QAItem

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.evaluation.baselines import EngineFactory, EvalEngine
    from llama_index_docmemo.evaluation.protocol import EvalPlan
    from llama_index_docmemo.store.base import PageStore

FN_GRID: tuple[float, ...] = (0.0, 0.1, 0.2, 0.4, 0.6, 0.8)
FP_GRID: tuple[float, ...] = (0.0, 0.05, 0.15, 0.3)
MAP_ENGINES: tuple[str, ...] = ("docmemo", "static-paged", "neighbours")
MAP_DIR = "reader_map"


def map_cell(
    fn: float, fp: float, runs: SeedRuns, items: Mapping[str, QAItem], n_pages: int
) -> dict[str, Any]:
    """One cell: DocMemo's all-hit gain after ``n_pages`` over each baseline, with intervals."""
    cell: dict[str, Any] = {"fn": fn, "fp": fp, "pages": n_pages}
    for baseline, key in (("static-paged", "static_paged"), ("neighbours", "neighbours")):
        result = paired(runs, baseline, items, n_pages)
        cell[f"gain_vs_{key}"] = None if result is None else result["diff"]
        cell[f"gain_vs_{key}_ci"] = None if result is None else result["ci"]
        if result is not None:
            cell[f"discordant_vs_{key}"] = [result["docmemo_only"], result["baseline_only"]]
    return cell


def summary_lines(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """The map as a Markdown table (gain in points, 95% interval)."""

    def fmt(value: float | None, ci: Sequence[float] | None) -> str:
        if value is None:
            return "—"
        interval = f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else ""
        return f"{100 * value:+.1f}{interval}"

    lines = [
        "| fn | fp | gain vs static-paged [95% CI] | gain vs neighbours [95% CI] |",
        "|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['fn']:g} | {c['fp']:g} | "
            f"{fmt(c['gain_vs_static_paged'], c.get('gain_vs_static_paged_ci'))} | "
            f"{fmt(c['gain_vs_neighbours'], c.get('gain_vs_neighbours_ci'))} |"
        )
    return lines


def run_reader_map(
    plan: EvalPlan,
    store: PageStore,
    encoder: PageEncoder,
    make_engine: EngineFactory,
    errors: list[str],
    *,
    fn_grid: Sequence[float] = FN_GRID,
    fp_grid: Sequence[float] = FP_GRID,
) -> list[dict[str, Any]]:
    """Run every cell (resumable under ``OUT/reader_map``) and write ``reader_map.json``/``.md``/``.png``."""
    from llama_index_docmemo.evaluation.baselines import build_engines
    from llama_index_docmemo.evaluation.protocol import run_seeds
    from llama_index_docmemo.evaluation.simulated import SimulatedReader

    # the map's own seeds; the simulated reader has no stop signal of its own ("reader" -> never)
    plan = replace(
        plan,
        seeds=plan.map_seeds,
        stop_mode="never" if plan.stop_mode == "reader" else plan.stop_mode,
    )
    items = {item.qid: item for item in plan.dataset.items}
    n_pages = plan.configs.budget
    root = plan.out / MAP_DIR
    cells: list[dict[str, Any]] = []

    def make_engines(seed: int) -> Mapping[str, EvalEngine]:
        return build_engines(
            list(MAP_ENGINES),
            configs=plan.configs,
            seed=seed,
            make_engine=make_engine,
            store=store,
            encoder=encoder,
        )

    for fn in fn_grid:
        for fp in fp_grid:

            def settings(seed: int, fn: float = fn, fp: float = fp) -> dict[str, Any]:
                return {**plan.settings(seed), "reader": "simulated", "fn": fn, "fp": fp}

            runs = run_seeds(
                plan,
                list(MAP_ENGINES),
                root / f"fn{fn:g}_fp{fp:g}",
                make_engines,
                lambda seed, fn=fn, fp=fp: SimulatedReader(fn=fn, fp=fp, seed=seed),
                settings,
                errors,
                keep_traces=False,
            )
            cells.append(map_cell(fn, fp, runs, items, n_pages))
    write_reader_map(plan, cells, n_pages)
    return cells


def write_reader_map(plan: EvalPlan, cells: list[dict[str, Any]], n_pages: int) -> None:
    out: Path = plan.out
    stop = plan.stop(0)
    doc = {
        "dataset": plan.dataset.name,
        "split": plan.split,
        "seeds": plan.seeds,
        "pages": n_pages,
        "stop": plan.settings()["stop"],
        "reader": "simulated",
        "definition": "gain = DocMemo all-hit minus the baseline's after T*k pages, same questions, "
        "paired bootstrap 95% interval over questions (seed-averaged)",
        "cells": cells,
    }
    (out / "reader_map.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    title = (
        f"{plan.dataset.name} ({plan.split} split, {n_pages} pages, stop {stop.mode}, "
        f"seed(s) {','.join(map(str, plan.seeds))})"
    )
    md = [f"# Reader-quality map — {title}", "", *summary_lines(cells), ""]
    (out / "reader_map.md").write_text("\n".join(md), encoding="utf-8")
    from llama_index_docmemo.evaluation.plots import plot_reader_map

    plot_reader_map(cells, out / "reader_map.png", title=title)
