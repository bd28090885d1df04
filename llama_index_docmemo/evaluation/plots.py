"""PNG plots of a report: recall and all-hit per round by engine, and recall against pages read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llama_index_docmemo._extras import require


def _pyplot() -> Any:
    matplotlib = require("matplotlib", extra="plots", feature="evaluation plots")
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", extra="plots", feature="evaluation plots")


def _suffix(report: Mapping[str, Any]) -> str:
    return " (simulated reasoner)" if report["reasoner"] == "simulated" else ""


def plot_per_round(report: Mapping[str, Any], path: str | Path) -> Path:
    """Two panels (evidence recall, all-hit) against round, one line per engine."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    colours = plt.get_cmap("tab20").colors
    for i, (name, entry) in enumerate(report["engines"].items()):
        rounds = [r["round"] for r in entry["per_round"]]
        style = "--" if len(set(r["evidence_recall"] for r in entry["per_round"])) <= 1 else "-"
        for ax, key in zip(axes, ("evidence_recall", "all_hit"), strict=True):
            ax.plot(
                rounds,
                [r[key] for r in entry["per_round"]],
                style,
                marker="o",
                color=colours[i % len(colours)],
                label=name,
            )
    for ax, title in zip(axes, ("Evidence recall", "All-hit rate"), strict=True):
        ax.set_xlabel("round")
        ax.set_title(title)
        ax.set_ylim(0, 1)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"{report['dataset']}: per round{_suffix(report)}")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_recall_vs_pages(report: Mapping[str, Any], path: str | Path) -> Path:
    """Final evidence recall against mean pages read, one point per engine."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    colours = plt.get_cmap("tab20").colors
    for i, (name, entry) in enumerate(report["engines"].items()):
        ax.scatter(
            entry["pages_read"], entry["evidence_recall"], s=36, color=colours[i % len(colours)]
        )
        ax.annotate(
            name,
            (entry["pages_read"], entry["evidence_recall"]),
            fontsize=8,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.set_xlabel("pages read per question")
    ax.set_ylabel("evidence recall")
    ax.grid(alpha=0.3)
    ax.set_title(f"{report['dataset']}: recall vs pages read{_suffix(report)}")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Both plots into ``out_dir``: ``per_round.png`` and ``recall_vs_pages.png``."""
    out = Path(out_dir)
    return [
        plot_per_round(report, out / "per_round.png"),
        plot_recall_vs_pages(report, out / "recall_vs_pages.png"),
    ]
