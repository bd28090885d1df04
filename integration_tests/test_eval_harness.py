"""`docmemo eval` end to end on a tiny generated dataset: real PDFs, real store and encoder, resumable."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

pytest.importorskip("llama_index.retrievers.bm25")
fitz = pytest.importorskip("pymupdf")

from llama_index_docmemo.evaluation.cli import add_eval_parser, run_eval  # noqa: E402

FILLER = "This page describes the office garden, the weather in spring and the colour of the walls."
FACTS = {
    ("alpha.pdf", 4): "Revenue of the Alpha company in 2023 was 41.5 million dollars.",
    ("alpha.pdf", 9): "The Alpha company employed 1200 engineers at the end of 2023.",
    ("beta.pdf", 2): "The Beta survey interviewed 2500 adults by cellphone.",
    ("beta.pdf", 11): "Foreign born respondents in the Beta survey numbered 800.",
}


def make_pdf(path: Path, doc: str, n_pages: int) -> None:
    pdf = fitz.open()
    for page in range(1, n_pages + 1):
        p = pdf.new_page()
        p.insert_text((72, 72), f"Section {1 + page // 4}", fontsize=16)
        p.insert_textbox(
            fitz.Rect(72, 100, 540, 700),
            FACTS.get((doc, page), f"{FILLER} Page {page}."),
            fontsize=11,
        )
    pdf.save(path)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    (root / "pdfs").mkdir()
    make_pdf(root / "pdfs" / "alpha.pdf", "alpha.pdf", 12)
    make_pdf(root / "pdfs" / "beta.pdf", "beta.pdf", 14)
    rows = [
        {
            "qid": "t1",
            "doc": "alpha.pdf",
            "question": "What was the revenue of Alpha in 2023?",
            "answer": "41.5",
            "evidence_pages": [4],
            "answer_format": "Float",
        },
        {
            "qid": "t2",
            "doc": "alpha.pdf",
            "question": "How many engineers did Alpha employ and what was its revenue?",
            "answer": "['1200', '41.5']",
            "evidence_pages": [4, 9],
            "answer_format": "List",
        },
        {
            "qid": "t3",
            "doc": "beta.pdf",
            "question": "Which is greater: adults interviewed by cellphone or foreign born respondents?",
            "answer": "adults interviewed by cellphone",
            "evidence_pages": [2, 11],
            "answer_format": "Str",
        },
        {
            "qid": "t4",
            "doc": "beta.pdf",
            "question": "What is the CEO's favourite colour?",
            "answer": "Not answerable",
            "evidence_pages": [],
            "answer_format": "None",
        },
    ]
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="docmemo")
    add_eval_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["eval", *argv])


def test_simulated_eval_end_to_end_and_resume(dataset: Path, tmp_path: Path) -> None:
    out, store = tmp_path / "out", tmp_path / "store"
    args = parse(
        "--data",
        str(dataset),
        "--engines",
        "docmemo,static,llamaindex-topk,greedy,no_belief",
        "--reasoner",
        "simulated",
        "--out",
        str(out),
        "--store",
        str(store),
        "--no-progress",
        "--fn",
        "0",
        "--fp",
        "0",
    )
    assert run_eval(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert (
        report["reasoner"] == "simulated"
        and report["n_questions"] == 4
        and report["dataset"] == dataset.name
    )
    assert list(report["engines"]) == [
        "docmemo",
        "static",
        "llamaindex-topk",
        "greedy",
        "no_belief",
    ]
    dm, st = report["engines"]["docmemo"], report["engines"]["static"]
    assert dm["accuracy"] is None and len(dm["per_round"]) == 3
    rec = [r["evidence_recall"] for r in dm["per_round"]]
    assert rec == sorted(rec) and 0 < rec[-1] <= 1
    assert st["pages_read"] == pytest.approx(dm["pages_read"])  # equal budget
    assert report["engines"]["llamaindex-topk"]["pages_read"] == pytest.approx(dm["pages_read"])
    md = (out / "report.md").read_text()
    assert "simulated reasoner" in md and "| static |" in md
    assert (out / "per_round.png").is_file() and (out / "recall_vs_pages.png").is_file()
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 20
    assert run_eval(args) == 0  # resumed: nothing re-run
    assert (out / "results.jsonl").read_text().splitlines() == lines
    other = parse(
        "--data",
        str(dataset),
        "--reasoner",
        "simulated",
        "--out",
        str(out),
        "--seed",
        "7",
        "--store",
        str(store),
        "--no-progress",
    )
    with pytest.raises(Exception, match="different .*seed"):
        run_eval(other)


def test_offline_eval_scores_answers(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = parse(
        "--data",
        str(dataset),
        "--reasoner",
        "offline",
        "--out",
        str(out),
        "--store",
        str(tmp_path / "store"),
        "--no-progress",
        "--limit",
        "2",
    )
    assert run_eval(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["n_questions"] == 2
    for entry in report["engines"].values():
        assert entry["accuracy"] is not None and 0.0 <= entry["accuracy"] <= 1.0
