"""Box grounding: complete evidence chains, crop labels, caps per round, the report's section."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.grounding import (
    CropCaps,
    GoldBox,
    chain_complete,
    crop_labelled_useful,
    gold_boxes,
    grounding_report,
    has_visual_boxes,
    kept_crops,
    to_points,
)
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.evaluation.report import render_grounding, write_report
from llama_index_docmemo.ingest.layout import LayoutBlock
from llama_index_docmemo.types import PageRef

DOC = "d.pdf"
P1, P2 = PageRef(DOC, 1), PageRef(DOC, 2)
A = (100.0, 100.0, 300.0, 200.0)
B = (100.0, 400.0, 300.0, 500.0)
CAPS = CropCaps(max_crops=8, max_table_crops=5, max_per_page=3, min_side=36.0, kinds=("table",))


def item(boxes: list[dict], sources: list[str] | None = None, qid: str = "q") -> QAItem:
    return QAItem(
        qid=qid,
        doc_id=DOC,
        question="revenue by region",
        answer="x",
        evidence_pages=tuple(sorted({b["page"] for b in boxes})),
        extra={"evidence_bboxes": boxes, "evidence_sources": sources or ["Table"]},
    )


def test_chain_complete_over_every_subset_of_two_gold_boxes() -> None:
    gold = [GoldBox(P1, A), GoldBox(P2, B)]
    near_a = (105.0, 100.0, 300.0, 210.0)  # IoU with A about 0.9
    candidates = [(P1, near_a), (P2, B), (P1, B), (P2, A), (P1, (0.0, 0.0, 600.0, 800.0))]
    for n in range(len(candidates) + 1):
        for cited in itertools.combinations(candidates, n):
            covers_a = (P1, near_a) in cited
            covers_b = (P2, B) in cited
            assert chain_complete(gold, list(cited)) == (covers_a and covers_b), cited
    assert not chain_complete([], [(P1, A)])


def test_a_box_on_the_wrong_page_or_too_loose_does_not_cover() -> None:
    gold = [GoldBox(P1, A)]
    assert not chain_complete(gold, [(P2, A)])
    whole_page = (0.0, 0.0, 612.0, 792.0)  # contains A but IoU about 0.04
    assert not chain_complete(gold, [(P1, whole_page)])


def test_crop_labels_follow_the_page_rates() -> None:
    gold = [GoldBox(P1, A)]
    boxes = [(10.0 * i, 10.0, 10.0 * i + 50, 60.0) for i in range(400)]
    on = [crop_labelled_useful(P1, A, gold, fn=0.25, fp=0.0, seed=s, key="q") for s in range(400)]
    off = [crop_labelled_useful(P1, b, gold, fn=0.0, fp=0.1, seed=0, key="q") for b in boxes]
    assert 0.65 < sum(on) / len(on) < 0.85
    assert 0.04 < sum(off) / len(off) < 0.17
    assert all(
        crop_labelled_useful(P1, A, gold, fn=0.0, fp=0.0, seed=s, key="q") for s in range(50)
    )
    assert not any(
        crop_labelled_useful(P1, b, gold, fn=0.0, fp=0.0, seed=0, key="q") for b in boxes
    )
    # the same crop under the same seed and question always gets the same label
    assert crop_labelled_useful(
        P1, A, gold, fn=0.5, fp=0.0, seed=3, key="q"
    ) == crop_labelled_useful(P1, A, gold, fn=0.5, fp=0.0, seed=3, key="q")


def test_gold_boxes_are_rescaled_to_the_page_and_scope_needs_visual_sources() -> None:
    assert to_points([10, 20, 30, 40], [100, 200], (200.0, 100.0)) == (20.0, 10.0, 60.0, 20.0)
    assert to_points([10, 20, 30, 40], None, (200.0, 100.0)) == (10.0, 20.0, 30.0, 40.0)
    q = item([{"page": 2, "page_size": [306, 396], "bbox": [50, 50, 150, 100]}])
    assert gold_boxes(q, lambda ref: (612.0, 792.0)) == [GoldBox(P2, (100.0, 100.0, 300.0, 200.0))]
    assert has_visual_boxes(q)
    assert not has_visual_boxes(item([{"page": 1, "bbox": list(A)}], sources=["Pure-text"]))
    assert not has_visual_boxes(item([], sources=["Table"]))


def table(page: int, bbox: tuple[float, float, float, float], text: str = "") -> LayoutBlock:
    return LayoutBlock(page=page, kind="table", bbox=bbox, text=text)


def test_kept_crops_apply_the_caps_per_round_in_page_order() -> None:
    tables = {P1: [table(1, (0, 60 * i, 200, 60 * i + 50)) for i in range(4)], P2: [table(2, B)]}
    caps = CropCaps(max_crops=8, max_table_crops=5, max_per_page=3, min_side=36.0, kinds=("table",))
    kept = kept_crops("q", [P1, P2], lambda ref: tables[ref], caps)
    assert [ref for ref, _ in kept] == [P1, P1, P1, P2]  # 3 per page; P2 ranks lower, still kept
    tight = CropCaps(
        max_crops=3, max_table_crops=5, max_per_page=3, min_side=36.0, kinds=("table",)
    )
    assert P2 not in {ref for ref, _ in kept_crops("q", [P1, P2], lambda ref: tables[ref], tight)}
    small = {P1: [table(1, (0, 0, 200, 20))]}
    assert kept_crops("q", [P1], lambda ref: small[ref], caps) == []


def test_report_counts_per_engine_and_renders(tmp_path: Path) -> None:
    q = item([{"page": 1, "bbox": list(A)}, {"page": 2, "bbox": list(B)}])
    blocks = {P1: [table(1, A)], P2: [table(2, B)]}
    runs = {
        0: {
            "docmemo": [QuestionRun("docmemo", "q", reads=[[P1], [P2]])],
            "static@5": [QuestionRun("static@5", "q", reads=[[P1]])],
        }
    }
    report = grounding_report(
        runs, [q], lambda ref: blocks[ref], lambda ref: (612.0, 792.0), caps=CAPS, fn=0.0, fp=0.0
    )
    assert report["n_questions"] == 1
    assert report["engines"]["docmemo"]["complete_chain"] == 1.0
    assert report["engines"]["static@5"]["complete_chain"] == 0.0
    noisy = grounding_report(
        runs, [q], lambda ref: blocks[ref], lambda ref: (612.0, 792.0), caps=CAPS, fn=1.0, fp=0.0
    )
    assert noisy["engines"]["docmemo"]["complete_chain"] == 0.0  # nothing labelled useful
    text = render_grounding(report)
    assert "| docmemo | 100.0 [100.0, 100.0] | 1 |" in text
    assert "| static@5 | 0.0 [0.0, 0.0] | 1 |" in text


@pytest.mark.parametrize("with_grounding", [True, False])
def test_write_report_adds_the_section_only_when_given(
    tmp_path: Path, with_grounding: bool
) -> None:
    q = item([{"page": 1, "bbox": list(A)}])
    runs = {0: {"docmemo": [QuestionRun("docmemo", "q", reads=[[P1]])]}}
    grounding = grounding_report(
        runs, [q], lambda ref: [table(1, A)], lambda ref: (612.0, 792.0), caps=CAPS, fn=0.0, fp=0.0
    )
    report = write_report(
        tmp_path,
        dataset="d",
        reader="simulated",
        items=[q],
        runs=runs,
        settings={"k": 5, "rounds": 1},
        grounding=grounding if with_grounding else None,
    )
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert ("## Box grounding" in markdown) == with_grounding
    assert ("grounding" in report) == with_grounding
