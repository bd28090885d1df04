"""Belief heat-map of a trace: grid contents, HTML without scripts, PNG output, format errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llama_index_docmemo.trace import (
    BeliefState,
    FeedbackRecord,
    PageRead,
    PageScore,
    QueryTrace,
    RoundTrace,
)
from llama_index_docmemo.visualize import heat_map, heat_map_figure, render_trace


def trace() -> QueryTrace:
    def ps(p: int) -> PageScore:
        return PageScore(doc_id="d.pdf", page=p, score=1.0)

    r1 = RoundTrace(
        round=1,
        query="q",
        lam=0.0,
        candidates=[ps(1), ps(2), ps(3)],
        selected=[ps(1), ps(2)],
        feedback=FeedbackRecord(status="need_more", useful=[ps(2)], irrelevant=[ps(1)]),
        beliefs=[
            BeliefState(doc_id="d.pdf", page=1, alpha=1, beta=2),
            BeliefState(doc_id="d.pdf", page=2, alpha=2, beta=1),
            BeliefState(doc_id="d.pdf", page=3, alpha=1.5, beta=1),
            BeliefState(doc_id="d.pdf", page=9, alpha=1, beta=1),
        ],
    )
    r2 = RoundTrace(
        round=2,
        query="q",
        lam=0.3,
        candidates=[ps(3)],
        selected=[ps(3)],
        feedback=FeedbackRecord(status="answered", useful=[ps(3)]),
        beliefs=[BeliefState(doc_id="d.pdf", page=3, alpha=2.5, beta=1)],
    )
    return QueryTrace(
        question="<b>q</b>?",
        answer="a",
        status="answered",
        stop_reason="answered",
        rounds=[r1, r2],
        reader="simulated",
        pages_read=[PageRead(doc_id="d.pdf", page=p, round=r) for p, r in ((1, 1), (2, 1), (3, 2))],
    )


def test_heat_map_grid() -> None:
    hm = heat_map(trace())
    assert hm.pages == [("d.pdf", 1), ("d.pdf", 2), ("d.pdf", 3)]  # page 9 never left the prior
    assert hm.rounds == [1, 2]
    assert hm.mean[0] == [pytest.approx(1 / 3), None]
    assert hm.mean[2][1] == pytest.approx(2.5 / 3.5)
    assert (
        (("d.pdf", 3), 2) in hm.read
        and (("d.pdf", 2), 1) in hm.useful
        and (("d.pdf", 1), 1) in hm.irrelevant
    )
    assert heat_map(trace(), max_pages=1).pages == [
        ("d.pdf", 1),
        ("d.pdf", 2),
        ("d.pdf", 3),
    ]  # reads always kept


def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    text = render_trace(trace(), tmp_path / "t.html").read_text()
    assert "<script" not in text and "&lt;b&gt;q&lt;/b&gt;" in text
    assert text.count("<tr>") == 5 and "●✓" in text and "●✗" in text and "simulated" in text
    assert "Judged useful by the reader: d.pdf p. 2 (round 1); d.pdf p. 3 (round 2)." in text


def _lightness(css: str) -> float:
    r, g, b = (int(v) for v in re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", css).groups())
    return 0.2126 * r + 0.7152 * g + 0.0722 * b  # what a grey print or any colour vision keeps


def test_html_colours_are_one_sequential_scale_with_a_legend(tmp_path: Path) -> None:
    text = render_trace(trace(), tmp_path / "t.html").read_text()
    shown = [float(v) for v in re.findall(r'<td style="background:rgb[^"]*">(\d\.\d\d)</td>', text)]
    assert shown == [0.0, 0.25, 0.5, 0.75, 1.0]  # the legend: the scale, labelled
    colours = re.findall(r"background:(rgb\([^)]*\))", text)
    cells = re.findall(r'background:(rgb\([^)]*\));color:[^"]*" title="posterior mean (\d\.\d\d)', text)
    assert len(cells) == 4 and colours
    by_mean = sorted((float(mean), _lightness(css)) for css, mean in cells)
    lightness = [light for _, light in by_mean]
    assert lightness == sorted(lightness, reverse=True)  # a higher belief is always darker
    assert lightness[0] - lightness[-1] > 60


def test_png_marks_differ_in_lightness_not_only_in_hue() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_rgb

    fig = heat_map_figure(heat_map(trace()), trace())
    filled = [tuple(c.get_facecolors()[0][:3]) for c in fig.axes[0].collections[1:]]
    assert len(filled) == 2  # useful, irrelevant
    lightness = [0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b in filled]
    assert abs(lightness[0] - lightness[1]) > 0.3, filled
    assert to_rgb("#1a9850") not in filled and to_rgb("#d73027") not in filled  # no red vs green


def test_png_draws_the_grid_without_touching_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    from PIL import Image

    backend = matplotlib.rcParams["backend"]
    switched: list[object] = []
    monkeypatch.setattr(matplotlib, "use", lambda *a, **k: switched.append(a))
    out = render_trace(trace(), tmp_path / "t.png")
    assert not switched and matplotlib.rcParams["backend"] == backend
    hm = heat_map(trace())
    fig = heat_map_figure(hm, trace())
    drawn = fig.axes[0].images[0].get_array()
    assert drawn.shape == (3, 2) and bool(drawn.mask[0, 1])  # no belief logged: masked, grey
    assert drawn[2, 1] == pytest.approx(2.5 / 3.5) and drawn[0, 0] == pytest.approx(1 / 3)
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == tuple(
            round(v * fig.dpi) for v in fig.get_size_inches()
        )


def test_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.svg"):
        render_trace(trace(), tmp_path / "t.svg")
