"""Belief heat-map of one query: pages x rounds, coloured by posterior mean, reads and labels marked.

``render_trace(trace, "q.png")`` draws it with matplotlib (the ``plots`` extra) on a ``Figure`` and
the Agg canvas, never touching pyplot's global backend; ``render_trace(trace, "q.html")`` writes a
self-contained HTML table (inline CSS, no scripts) that needs nothing extra.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_docmemo._extras import require
from llama_index_docmemo.trace import QueryTrace

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Page = tuple[str, int]


@dataclass
class HeatMap:
    """The grid a trace becomes: rows are pages, columns rounds; mean is None where no belief was logged."""

    pages: list[Page]
    rounds: list[int]
    mean: list[list[float | None]]
    read: set[tuple[Page, int]]
    useful: set[tuple[Page, int]]
    irrelevant: set[tuple[Page, int]]


def heat_map(trace: QueryTrace, max_pages: int = 60) -> HeatMap:
    """Collect beliefs and marks per (page, round); keeps every page read, then the most believed.

    Pages whose belief never left the prior and that were never read are left out, and at most
    ``max_pages`` rows are kept so a long document stays legible.
    """
    rounds = [r.round for r in trace.rounds]
    means: dict[Page, dict[int, float]] = {}
    read: set[tuple[Page, int]] = set()
    useful: set[tuple[Page, int]] = set()
    irrelevant: set[tuple[Page, int]] = set()
    for r in trace.rounds:
        for b in r.beliefs:
            means.setdefault((b.doc_id, b.page), {})[r.round] = b.mean
        for s in r.selected:
            read.add(((s.doc_id, s.page), r.round))
        if r.feedback is not None:
            useful |= {((p.doc_id, p.page), r.round) for p in r.feedback.useful}
            irrelevant |= {((p.doc_id, p.page), r.round) for p in r.feedback.irrelevant}
    for p in trace.pages_read:
        read.add(((p.doc_id, p.page), p.round))
    marked = {page for page, _ in read | useful | irrelevant}
    informative = {
        page
        for page, by_round in means.items()
        if any(abs(m - 0.5) > 1e-9 for m in by_round.values())
    }
    others = sorted(informative - marked, key=lambda p: -max(means[p].values()))
    keep = (
        sorted(marked)
        if len(marked) >= max_pages
        else sorted(marked | set(others[: max_pages - len(marked)]))
    )
    grid = [[means.get(page, {}).get(rnd) for rnd in rounds] for page in keep]
    return HeatMap(keep, rounds, grid, read, useful, irrelevant)


def _label(page: Page, multi_doc: bool) -> str:
    return f"{page[0]} p{page[1]}" if multi_doc else f"p{page[1]}"


def heat_map_figure(hm: HeatMap, trace: QueryTrace) -> Figure:
    """The heat-map on a ``matplotlib.figure.Figure`` (no pyplot, no global backend change)."""
    feature = "the belief heat-map (PNG)"
    matplotlib = require("matplotlib", extra="plots", feature=feature)
    figure = require("matplotlib.figure", extra="plots", feature=feature)
    np = require("numpy", extra="plots", feature=feature)
    grid = np.array([[np.nan if v is None else v for v in row] for row in hm.mean], dtype=float)
    if grid.size == 0:
        grid = np.full((max(len(hm.pages), 1), max(len(hm.rounds), 1)), np.nan)
    fig = figure.Figure(
        figsize=(2.2 + 1.1 * max(len(hm.rounds), 1), 1.6 + 0.24 * max(len(hm.pages), 1)), dpi=120
    )
    ax = fig.subplots()
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad="#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, vmin=0.0, vmax=1.0)
    multi_doc = len({p[0] for p in hm.pages}) > 1
    ax.set_yticks(range(len(hm.pages)), [_label(p, multi_doc) for p in hm.pages], fontsize=7)
    ax.set_xticks(range(len(hm.rounds)), [f"round {r}" for r in hm.rounds], fontsize=8)
    col = {rnd: i for i, rnd in enumerate(hm.rounds)}
    row = {page: i for i, page in enumerate(hm.pages)}
    for marks, symbol, color in (
        (hm.read, "o", "black"),
        (hm.useful, "P", USEFUL_MARK),
        (hm.irrelevant, "X", IRRELEVANT_MARK),
    ):
        pts = [(col[r], row[p]) for p, r in marks if p in row and r in col]
        if pts:
            xs, ys = zip(*pts, strict=True)
            filled = symbol != "o"
            ax.scatter(
                xs,
                ys,
                marker=symbol,
                s=40 if filled else 90,
                facecolors=color if filled else "none",
                edgecolors=color,
                linewidths=1.2,
            )
    fig.colorbar(image, ax=ax, label="belief (posterior mean)", fraction=0.05)
    title = trace.question if len(trace.question) <= 70 else trace.question[:67] + "..."
    reader = f" [{trace.reader}]" if trace.reader else ""
    ax.set_title(f"{title}{reader}\n○ read  + useful  × irrelevant", fontsize=8)
    fig.tight_layout()
    return fig


def _render_png(hm: HeatMap, trace: QueryTrace, path: Path) -> None:
    backend = require(
        "matplotlib.backends.backend_agg", extra="plots", feature="the belief heat-map (PNG)"
    )
    backend.FigureCanvasAgg(heat_map_figure(hm, trace)).print_png(str(path))


BELIEF_PALETTE = (
    (247, 251, 255),
    (222, 235, 247),
    (198, 219, 239),
    (158, 202, 225),
    (107, 174, 214),
    (66, 146, 198),
    (33, 113, 181),
    (8, 81, 156),
    (8, 48, 107),
)
"""ColorBrewer's 9-class "Blues" (matplotlib's ``Blues``, the PNG's): one hue, lightness falling as
the belief rises, so it reads the same with any colour vision and in grey."""
USEFUL_MARK = "#e69f00"
IRRELEVANT_MARK = "#000000"
"""The PNG's marks: Okabe and Ito's orange and black, told apart by shape and by lightness (never
red against green)."""


def _cell_color(mean: float | None) -> str:
    if mean is None:
        return "#eeeeee"
    at = max(0.0, min(1.0, mean)) * (len(BELIEF_PALETTE) - 1)
    low = min(int(at), len(BELIEF_PALETTE) - 2)
    share = at - low
    rgb = (
        round(a + (b - a) * share)
        for a, b in zip(BELIEF_PALETTE[low], BELIEF_PALETTE[low + 1], strict=True)
    )
    return "rgb({},{},{})".format(*rgb)


def _text_color(mean: float | None) -> str:
    """Marks stay legible: white on the darker half of the scale."""
    return "#ffffff" if mean is not None and mean > 0.6 else "#000000"


def belief_scale() -> str:
    """The colour legend of the heat-map table: the scale from belief 0 to 1, labelled."""
    cells = "".join(
        f'<td style="background:{_cell_color(v / 4)};color:{_text_color(v / 4)}">{v / 4:.2f}</td>'
        for v in range(5)
    )
    return (
        '<table class="belief-scale"><tr><th>belief</th>'
        f'{cells}<td style="background:#eeeeee">not logged</td></tr></table>'
    )


HEAT_MAP_CSS = (
    "table.heatmap{border-collapse:collapse}"
    ".heatmap td,.heatmap th,.belief-scale td,.belief-scale th{border:1px solid #ccc;"
    "padding:2px 8px;text-align:center}.belief-scale{border-collapse:collapse;margin:4px 0}"
    ".heatmap th{background:#fafafa}"
)


def heat_map_table(hm: HeatMap) -> str:
    """The heat-map as an HTML ``<table class="heatmap">`` with inline colours (style:
    :data:`HEAT_MAP_CSS`), for embedding in a larger page."""
    multi_doc = len({p[0] for p in hm.pages}) > 1
    head = "".join(f"<th>round {r}</th>" for r in hm.rounds)
    rows = []
    for page, means in zip(hm.pages, hm.mean, strict=True):
        cells = []
        for rnd, mean in zip(hm.rounds, means, strict=True):
            marks = ("●" if (page, rnd) in hm.read else "") + (
                "✓" if (page, rnd) in hm.useful else "✗" if (page, rnd) in hm.irrelevant else ""
            )
            title = "no belief logged" if mean is None else f"posterior mean {mean:.2f}"
            style = f"background:{_cell_color(mean)};color:{_text_color(mean)}"
            cells.append(f'<td style="{style}" title="{title}">{marks}</td>')
        rows.append(f"<tr><th>{html.escape(_label(page, multi_doc))}</th>{''.join(cells)}</tr>")
    return f'<table class="heatmap"><tr><th>page</th>{head}</tr>{"".join(rows)}</table>'


HEAT_MAP_LEGEND = (
    "Colour: belief (posterior mean, light 0 → dark blue 1, one hue: see the scale; grey: not "
    "logged). ● read this round, ✓ judged useful, ✗ judged irrelevant."
)


def useful_pages(hm: HeatMap) -> str:
    """The pages the reader judged useful, each with its document and rounds (plain text)."""
    rounds: dict[Page, list[int]] = {}
    for page, rnd in sorted(hm.useful, key=lambda item: (item[1], item[0])):
        rounds.setdefault(page, []).append(rnd)
    listed = "; ".join(
        f"{doc_id} p. {page} (round {', '.join(map(str, found))})"
        for (doc_id, page), found in rounds.items()
    )
    return f"Judged useful by the reader: {listed or 'no page'}."


def render_html(hm: HeatMap, trace: QueryTrace) -> str:
    """The heat-map as one HTML document: a table with inline styles, no scripts."""
    reader = f" — reader: {html.escape(trace.reader)}" if trace.reader else ""
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>DocMemo belief heat-map</title>'
        f"<style>body{{font-family:sans-serif;font-size:13px}}{HEAT_MAP_CSS}</style>"
        f"</head><body><h3>{html.escape(trace.question)}</h3>"
        f"<p>Answer: {html.escape(trace.answer)} ({html.escape(trace.status)}, stop: "
        f"{html.escape(trace.stop_reason)}){reader}</p>"
        f"<p>{html.escape(useful_pages(hm))}</p>"
        f"<p>{HEAT_MAP_LEGEND}</p>{belief_scale()}"
        f"{heat_map_table(hm)}</body></html>\n"
    )


def render_trace(trace: QueryTrace, path: str | Path, *, max_pages: int = 60) -> Path:
    """Write the belief heat-map of ``trace`` to ``path``: PNG for ``.png``, HTML for ``.html``/``.htm``."""
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in (".png", ".html", ".htm"):
        raise ValueError(f"{out}: unsupported heat-map format {suffix!r} (use .png or .html)")
    hm = heat_map(trace, max_pages=max_pages)
    if suffix == ".png":
        _render_png(hm, trace, out)
    else:
        out.write_text(render_html(hm, trace), encoding="utf-8")
    return out
