"""`docmemo eval` end to end on a tiny generated dataset: real PDFs, real store and encoder, resumable."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

pytest.importorskip("llama_index.retrievers.bm25")
fitz = pytest.importorskip("pymupdf")

from llama_index_docmemo.evaluation.cli import eval_parser, main, run_eval  # noqa: E402

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
    return eval_parser().parse_args(list(argv))


ENGINES = "docmemo,static-paged,neighbours,static@2,static@6,llamaindex-topk,llamaindex-topk-ocr,no_belief"


def test_simulated_eval_end_to_end_and_resume(dataset: Path, tmp_path: Path) -> None:
    out, store = tmp_path / "out", tmp_path / "store"
    common = ("--data", str(dataset), "--out", str(out), "--store", str(store), "--no-progress")
    args = parse(
        *common,
        "--engines",
        ENGINES,
        "--reader",
        "simulated",
        "--split",
        "all",
        "--seeds",
        "0-1",
        "--k",
        "2",
        "--fn",
        "0",
        "--fp",
        "0",
    )
    assert run_eval(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["reader"] == "simulated" and report["n_questions"] == 4
    assert report["seeds"] == [0, 1] and report["split"] == "all"
    assert report["stop"]["mode"] == "never"
    assert list(report["engines"]) == ENGINES.split(",")
    for name, entry in report["engines"].items():
        assert [c["pages"] for c in entry["curve"]] == [2, 4, 6]
        hits = [c["all_hit"] for c in entry["curve"]]
        assert hits == sorted(hits) and all(0.0 <= h <= 1.0 for h in hits)
        for point in entry["curve"]:
            lo, hi = point["all_hit_ci"]
            assert lo <= point["all_hit"] <= hi
            assert point["recall_ci"][0] <= point["recall"] <= point["recall_ci"][1]
        if name != "docmemo":
            pair = entry["paired_vs_docmemo"]
            assert {"diff", "ci", "docmemo_only", "baseline_only"} <= set(pair)
            assert pair["ci"][0] <= pair["diff"] <= pair["ci"][1]
    engines = report["engines"]
    # --stop never: every round-based engine reads the whole budget, one-round ones their K
    for name in ("docmemo", "static-paged", "neighbours", "no_belief", "llamaindex-topk"):
        assert engines[name]["pages_read"] == pytest.approx(6.0), name
    assert engines["static@2"]["pages_read"] == pytest.approx(2.0)
    # static@6 is static-paged without its reading between rounds: the same pages, fixed budget,
    # in one request instead of one a round
    cost = ("requests", "tokens")
    one, paged = engines["static@6"]["curve"], engines["static-paged"]["curve"]
    assert [{k: v for k, v in c.items() if k not in cost} for c in one] == [
        {k: v for k, v in c.items() if k not in cost} for c in paged
    ]
    assert [c["requests"] for c in one] == [1.0, 1.0, 1.0]
    assert [c["requests"] for c in paged] == [1.0, 2.0, 3.0]
    assert engines["static@6"]["cost"]["tokens"] < engines["static-paged"]["cost"]["tokens"]
    # every page has a text layer: the store's text (OCR where needed) finds what the PDF's does
    assert engines["llamaindex-topk-ocr"]["curve"] == engines["llamaindex-topk"]["curve"]
    # a perfect reader (fn=fp=0) is measured as such
    assert engines["docmemo"]["reader_rates"]["fn"] == 0.0
    assert engines["docmemo"]["reader_rates"]["fp"] == 0.0
    md = (out / "report.md").read_text()
    assert "simulated reader" in md and "| static-paged |" in md and "Split: **all**" in md
    assert (out / "curves.png").is_file()
    lines = (out / "seed-0" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4 * 8
    assert run_eval(args) == 0  # resumed: nothing re-run
    assert (out / "seed-0" / "results.jsonl").read_text().splitlines() == lines
    other = parse(*common, "--reader", "simulated", "--split", "all", "--fn", "0.4")
    with pytest.raises(Exception, match="different .*fn"):
        run_eval(other)


def test_report_split_and_reader_map(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = parse(
        "--data",
        str(dataset),
        "--out",
        str(out),
        "--store",
        str(tmp_path / "store"),
        "--no-progress",
        "--engines",
        "docmemo,static-paged",
        "--reader",
        "simulated",
        "--k",
        "2",
        "--reader-map",
    )
    assert run_eval(args) == 0
    report = json.loads((out / "report.json").read_text())
    # the report half of this tiny set: beta.pdf's two questions (one of them unanswerable)
    assert report["split"] == "report" and report["n_questions"] == 2
    assert report["n_page_scored"] == 1
    cells = json.loads((out / "reader_map.json").read_text())["cells"]
    assert len(cells) == 24
    for cell in cells:
        assert {"fn", "fp", "gain_vs_static_paged", "gain_vs_neighbours"} <= set(cell)
        assert -1.0 <= cell["gain_vs_static_paged"] <= 1.0
    assert (out / "reader_map.png").read_bytes()[:4] == b"\x89PNG"


def test_offline_eval_scores_answers_and_measures_the_reader(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = parse(
        "--data",
        str(dataset),
        "--reader",
        "offline",
        "--engines",
        "docmemo,static-paged",
        "--split",
        "all",
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
    rates = report["reader_rates"]
    assert rates["engine"] == "docmemo" and rates["gold_pages_read"] > 0
    assert 0.0 <= rates["fn"] <= 1.0 and 0.0 <= rates["fp"] <= 1.0
    assert "measured reader rates (offline" in capsys.readouterr().out


def test_corpus_scope_asks_the_whole_store_and_reports_documents(
    dataset: Path, tmp_path: Path
) -> None:
    """--scope corpus: every question is asked of the whole store, which holds every document
    of the dataset even when the split's questions are about one of them."""
    out, store = tmp_path / "out", tmp_path / "store"
    common = ("--data", str(dataset), "--out", str(out), "--store", str(store), "--no-progress")
    engines = "docmemo,static-paged,two-stage,no_document_beliefs"
    args_list = [
        *common,
        *("--engines", engines, "--reader", "simulated", "--scope", "corpus"),
        *("--split", "tune", "--seeds", "0", "--k", "2", "--fn", "0", "--fp", "0"),
    ]  # the tuning half holds alpha.pdf's questions only
    args = parse(*args_list)
    assert run_eval(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["scope"] == "corpus" and report["n_questions"] == 2
    documents = {name: e["documents"] for name, e in report["engines"].items()}
    assert documents["two-stage"]["documents_read"]["mean"] == 1.0
    assert documents["docmemo"]["right_document_round1"]["mean"] == 1.0
    assert documents["static-paged"]["documents_read"]["mean"] > 1.0  # beta.pdf is in the store
    md = (out / "report.md").read_text()
    assert "Scope: **corpus**" in md and "| two-stage |" in md
    assert report["siblings"]["questions"] == 2  # the sibling count, over the whole store
    assert f"the {report['siblings']['decidable']} questions whose gold pages" in md
    in_document = parse(*[a for a in args_list if a not in ("--scope", "corpus")])
    with pytest.raises(Exception, match="different .*scope"):
        run_eval(in_document)  # a resume must keep the scope


def test_corpus_scope_refuses_the_per_document_stock_engines(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data", str(dataset), "--out", str(tmp_path / "out"), "--scope", "corpus"]
    with pytest.raises(SystemExit) as exit_:
        main("eval", [*argv, "--engines", "docmemo,llamaindex-topk"])
    assert exit_.value.code == 2
    assert "llamaindex-topk build an index per document" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work
