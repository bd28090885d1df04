"""PNG plots: fixed-budget curves with intervals, and the reader-quality heat-map."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index_docmemo._extras import require


def _pyplot() -> Any:
    matplotlib = require("matplotlib", extra="plots", feature="evaluation plots")
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", extra="plots", feature="evaluation plots")


def _suffix(report: Mapping[str, Any]) -> str:
    return " (simulated reasoner)" if report["reasoner"] == "simulated" else ""


def plot_curves(report: Mapping[str, Any], path: str | Path) -> Path:
    """All-hit and evidence recall against pages read, one line per engine, 95% intervals as bars."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    colours = plt.get_cmap("tab20").colors
    for i, (name, entry) in enumerate(report["engines"].items()):
        points = [c for c in entry["curve"] if c["all_hit"] is not None]
        if not points:
            continue
        pages = [c["pages"] + 0.12 * (i - len(report["engines"]) / 2) for c in points]
        for ax, key in zip(axes, ("all_hit", "recall"), strict=True):
            values = [c[key] for c in points]
            lows = [v - c[f"{key}_ci"][0] for v, c in zip(values, points, strict=True)]
            highs = [c[f"{key}_ci"][1] - v for v, c in zip(values, points, strict=True)]
            ax.errorbar(
                pages,
                values,
                yerr=[lows, highs],
                marker="o",
                capsize=3,
                color=colours[i % len(colours)],
                label=name,
            )
    for ax, title in zip(axes, ("All-hit rate", "Evidence recall"), strict=True):
        ax.set_xlabel("pages read")
        ax.set_title(title)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    stop = report.get("stop", {}).get("label", "")
    fig.suptitle(
        f"{report['dataset']} ({report.get('split', 'all')} split, {stop}){_suffix(report)}"
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_reader_map(cells: Sequence[Mapping[str, Any]], path: str | Path, *, title: str) -> Path:
    """Two heat-maps (gain over static-paged, over neighbours) on the fn x fp grid, in points."""
    plt = _pyplot()
    fns = sorted({c["fn"] for c in cells})
    fps = sorted({c["fp"] for c in cells})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, key, name in zip(
        axes,
        ("gain_vs_static_paged", "gain_vs_neighbours"),
        ("over static-paged", "over neighbours"),
        strict=True,
    ):
        grid = [[float("nan")] * len(fps) for _ in fns]
        for c in cells:
            if c.get(key) is not None:
                grid[fns.index(c["fn"])][fps.index(c["fp"])] = 100 * c[key]
        image = ax.imshow(grid, cmap="RdBu", vmin=-10, vmax=10, origin="lower", aspect="auto")
        for r, row in enumerate(grid):
            for col, value in enumerate(row):
                if value == value:
                    ax.text(col, r, f"{value:+.1f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(fps)), [f"{v:g}" for v in fps])
        ax.set_yticks(range(len(fns)), [f"{v:g}" for v in fns])
        ax.set_xlabel("reader false-positive rate (fp)")
        ax.set_ylabel("reader false-negative rate (fn)")
        ax.set_title(f"DocMemo all-hit gain {name} (points)")
        fig.colorbar(image, ax=ax)
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """The fixed-budget curves into ``out_dir/curves.png``."""
    return [plot_curves(report, Path(out_dir) / "curves.png")]
