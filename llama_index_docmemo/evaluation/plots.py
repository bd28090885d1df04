"""PNG plots: fixed-budget curves with intervals, and the reader-quality heat-map.

Drawn on ``matplotlib.figure.Figure`` objects rendered by the Agg canvas: nothing here touches
pyplot or the process's matplotlib backend, so a host application's plotting is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo._extras import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 110


def _figure(width: float, height: float) -> Figure:
    figure = require("matplotlib.figure", extra="eval", feature="evaluation plots")
    return figure.Figure(figsize=(width, height), dpi=DPI)


def save_png(fig: Figure, path: str | Path) -> Path:
    """Render ``fig`` with the Agg canvas into a PNG at ``path``."""
    backend = require("matplotlib.backends.backend_agg", extra="eval", feature="evaluation plots")
    out = Path(path)
    backend.FigureCanvasAgg(fig).print_png(str(out))
    return out


def _suffix(report: Mapping[str, Any]) -> str:
    return " (simulated reader)" if report["reader"] == "simulated" else ""


def curves_figure(report: Mapping[str, Any]) -> Figure:
    """Top: all-hit and evidence recall against the reading budget, one line per engine, 95%
    intervals as error bars (engines shifted slightly along x so their bars do not overlap).
    Bottom, the accuracy-per-cost curves: all-hit against the pages each engine actually read
    and against its estimated prompt tokens (an early stop moves a point left)."""
    colormaps = require("matplotlib", extra="eval", feature="evaluation plots").colormaps
    fig = _figure(13, 9.2)
    axes = fig.subplots(2, 2)
    colours = colormaps["tab20"].colors
    for i, (name, entry) in enumerate(report["engines"].items()):
        points = [c for c in entry["curve"] if c["all_hit"] is not None]
        if not points:
            continue
        colour = colours[i % len(colours)]
        pages = [c["pages"] + 0.12 * (i - len(report["engines"]) / 2) for c in points]
        for ax, key in zip(axes[0], ("all_hit", "recall"), strict=True):
            values = [c[key] for c in points]
            lows = [v - c[f"{key}_ci"][0] for v, c in zip(values, points, strict=True)]
            highs = [c[f"{key}_ci"][1] - v for v, c in zip(values, points, strict=True)]
            ax.errorbar(
                pages, values, yerr=[lows, highs], marker="o", capsize=3, color=colour, label=name
            )
        for ax, key in zip(axes[1], ("pages_read", "tokens"), strict=True):
            ax.plot(
                [c[key] for c in points], [c["all_hit"] for c in points], marker="o", color=colour
            )
    titles = ("All-hit rate", "Evidence recall", "All-hit per pages read", "All-hit per token")
    xlabels = ("reading budget (pages)", "reading budget (pages)", "pages read (mean)")
    estimate = report.get("token_estimate", {})
    xlabels += (f"estimated prompt tokens (mean; {estimate.get('source', 'estimate')})",)
    for ax, title, xlabel in zip(axes.flat, titles, xlabels, strict=True):
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    stop = report.get("stop", {}).get("label", "")
    fig.suptitle(
        f"{report['dataset']} ({report.get('split', 'all')} split, {stop}){_suffix(report)}"
    )
    fig.tight_layout()
    return fig


def reader_map_figure(cells: Sequence[Mapping[str, Any]], *, title: str) -> Figure:
    """Two heat-maps (gain over static-paged, over neighbours), in points: rows are the reader's
    false-negative rates (fn, rising upwards), columns its false-positive rates (fp)."""
    fns = sorted({c["fn"] for c in cells})
    fps = sorted({c["fp"] for c in cells})
    fig = _figure(11, 4.4)
    axes = fig.subplots(1, 2)
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
    return fig


def plot_curves(report: Mapping[str, Any], path: str | Path) -> Path:
    """The fixed-budget curves as a PNG at ``path``."""
    return save_png(curves_figure(report), path)


def plot_reader_map(cells: Sequence[Mapping[str, Any]], path: str | Path, *, title: str) -> Path:
    """The reader-quality map as a PNG at ``path``."""
    return save_png(reader_map_figure(cells, title=title), path)


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """The fixed-budget curves into ``out_dir/curves.png``."""
    return [plot_curves(report, Path(out_dir) / "curves.png")]
