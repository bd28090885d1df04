"""``benchmarks/build_dataset.py`` on small inputs shaped like the public downloads (no network):
MMLongBench-Doc's ``samples.json`` + ``documents/``, FinanceBench's JSON lines + ``pdfs/``. The
folder it writes loads in the harness (``load_dataset``) with the gold pages 1-based."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pymupdf
import pytest

from llama_index_docmemo.evaluation.datasets import load_dataset
from tests.benchmark_module import load_benchmark

build_dataset = load_benchmark("build_dataset")


def write_pdf(path: Path, pages: int, text: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pymupdf.open() as pdf:
        for n in range(pages):
            page = pdf.new_page()
            if text:
                page.insert_text((72, 72), f"{path.stem} page {n + 1}")
        pdf.save(path)


def mmlongbench_source(root: Path) -> Path:
    """``data/`` of the MMLongBench-Doc repository, in miniature: lists as Python literals."""
    samples = [
        {
            "doc_id": "report.pdf",
            "doc_type": "Research report / Introduction",
            "question": "How many?",
            "answer": "8",
            "evidence_pages": "[2, 3]",
            "evidence_sources": "['Pure-text (Plain-text)', 'Table']",
            "answer_format": "Int",
        },
        {
            "doc_id": "report.pdf",
            "doc_type": "Research report / Introduction",
            "question": "Which year?",
            "answer": "Not answerable",
            "evidence_pages": "[]",
            "evidence_sources": "[]",
            "answer_format": "None",
        },
        {
            "doc_id": "slides.pdf",
            "doc_type": "Tutorial/Workshop",
            "question": "Which shapes?",
            "answer": "['Circle', 'Rectangle']",
            "evidence_pages": "[9]",  # past the deck's last page
            "evidence_sources": "['Figure']",
            "answer_format": "List",
        },
        {
            "doc_id": "absent.pdf",
            "doc_type": "Guidebook",
            "question": "Where?",
            "answer": "Berlin",
            "evidence_pages": "[1]",
            "evidence_sources": "['Figure']",
            "answer_format": "Str",
        },
    ]
    data = root / "MMLongBench-Doc" / "data"
    data.mkdir(parents=True)
    (data / "samples.json").write_text(json.dumps(samples, indent=4))
    write_pdf(data / "documents" / "report.pdf", 4)
    write_pdf(data / "documents" / "slides.pdf", 3, text=False)
    return data


def test_mmlongbench_layout_loads_in_the_harness(tmp_path: Path) -> None:
    out = tmp_path / "mmlongbench-doc"
    assert build_dataset.main(
        ["mmlongbench", "--source", str(mmlongbench_source(tmp_path)), "--out", str(out)]
    ) == 0
    rows = [json.loads(line) for line in (out / "qa.jsonl").read_text().splitlines()]
    assert [r["qid"] for r in rows] == ["mmlb-0000", "mmlb-0001", "mmlb-0002"]  # absent.pdf out
    assert rows[0] == {
        "qid": "mmlb-0000",
        "doc": "report.pdf",
        "question": "How many?",
        "answer": "8",
        "evidence_pages": [2, 3],
        "answer_format": "Int",
        "n_pages": 4,
        "evidence_valid": True,
        "evidence_sources": ["Pure-text (Plain-text)", "Table"],
        "doc_type": "Research report / Introduction",
    }
    assert rows[2]["evidence_valid"] is False  # page 9 of a 3-page deck
    dataset = load_dataset(out)
    assert dataset.doc_ids == ["report.pdf", "slides.pdf"]
    assert [i.scored_on_pages for i in dataset.items] == [True, False, False]
    docs = [line.split("\t") for line in (out / "docs.tsv").read_text().splitlines()]
    assert docs[0] == ["doc", "bytes", "n_pages", "n_questions", "text_layer", "sha256"]
    assert [d[:1] + d[2:5] for d in docs[1:]] == [
        ["report.pdf", "4", "2", "yes"],
        ["slides.pdf", "3", "1", "no"],
    ]


def test_financebench_pages_become_one_based_and_only_the_questions_document_counts(
    tmp_path: Path,
) -> None:
    source = tmp_path / "financebench"
    lines = [
        {
            "financebench_id": "financebench_id_03029",
            "company": "3M",
            "doc_name": "3M_2018_10K",
            "question_type": "metrics-generated",
            "question_reasoning": "Information extraction",
            "question": "What is the FY2018 capital expenditure?",
            "answer": "$1577.00",
            "evidence": [
                {"evidence_text": "...", "doc_name": "3M_2018_10K", "evidence_page_num": 4},
                {"evidence_text": "...", "doc_name": "3M_2018_10K", "evidence_page_num": 0},
                {"evidence_text": "...", "doc_name": "3M_2017_10K", "evidence_page_num": 2},
            ],
        }
    ]
    (source / "data").mkdir(parents=True)
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    (source / "data" / "financebench_open_source.jsonl").write_text(text)
    write_pdf(source / "pdfs" / "3M_2018_10K.pdf", 6)
    out = tmp_path / "out"
    report = build_dataset.build("financebench", source, out, link=True)
    assert report.summary() == "1 questions over 1 PDFs (0 with a gold page outside the document)"
    (item,) = load_dataset(out).items
    assert (item.qid, item.doc_id, item.evidence_pages) == (
        "financebench_id_03029",
        "3M_2018_10K.pdf",
        (1, 5),
    )
    assert item.answer_format is None and (out / "pdfs" / "3M_2018_10K.pdf").is_symlink()


def test_the_documents_kept_and_the_missing_pdfs_are_said(tmp_path: Path) -> None:
    source = mmlongbench_source(tmp_path)
    report = build_dataset.build("mmlongbench", source, tmp_path / "out")
    assert report.missing_docs == ("absent.pdf",) and report.skipped_questions == 1
    assert "1 questions left out, their PDF missing: absent.pdf" in report.summary()
    only = build_dataset.build("mmlongbench", source, tmp_path / "only", keep={"slides.pdf"})
    assert (only.questions, only.docs, only.invalid) == (1, 1, 1)


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        (
            '[{"doc_id": "a.pdf", "question": "q", "answer": "a", "evidence_pages": "[2,"}]',
            r"\[0\]: expected a list",
        ),
        (
            '[{"doc_id": "a.pdf", "answer": "a", "evidence_pages": "[2]"}]',
            r"\[0\]: no field 'question'",
        ),
        ('{"doc_id": "a.pdf"}', "expected a JSON list"),
    ],
)
def test_a_source_not_in_the_public_shape_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], samples: str, message: str
) -> None:
    (tmp_path / "samples.json").write_text(samples)
    argv = ["mmlongbench", "--source", str(tmp_path), "--out", str(tmp_path / "o")]
    code = build_dataset.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "samples.json" in err
    assert re.search(message, err), err


def test_a_pdf_that_does_not_open_is_named(tmp_path: Path) -> None:
    source = mmlongbench_source(tmp_path)
    (source / "documents" / "slides.pdf").write_bytes(b"not a PDF")
    with pytest.raises(build_dataset.SourceError, match=r"slides\.pdf: not a readable PDF"):
        build_dataset.build("mmlongbench", source, tmp_path / "out")
