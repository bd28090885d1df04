"""Dataset loading: the qa.jsonl format, validation errors naming file:line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.datasets import DatasetError, load_dataset
from llama_index_docmemo.types import PageRef


def write(root: Path, rows: list[dict], pdfs: tuple[str, ...] = ("a.pdf",)) -> Path:
    (root / "pdfs").mkdir(parents=True)
    for name in pdfs:
        (root / "pdfs" / name).write_bytes(b"%PDF-1.4")
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


ROW = {"qid": "q1", "doc": "a.pdf", "question": "Q?", "answer": "A", "evidence_pages": [3, 1]}


def test_loads_items_with_defaults(tmp_path: Path) -> None:
    ds = load_dataset(
        write(
            tmp_path / "set",
            [
                ROW,
                {
                    **ROW,
                    "qid": "q2",
                    "evidence_pages": [],
                    "answer_format": "None",
                    "doc_type": "x",
                },
            ],
        )
    )
    assert ds.name == "set" and len(ds) == 2 and ds.doc_ids == ["a.pdf"]
    first, second = ds.items
    assert first.evidence_pages == (1, 3) and first.evidence_valid and first.scored_on_pages
    assert first.gold == {PageRef("a.pdf", 1), PageRef("a.pdf", 3)}
    assert not second.scored_on_pages and second.extra == {"doc_type": "x"}
    assert load_dataset(tmp_path / "set", limit=1).items == [first]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({k: v for k, v in ROW.items() if k != "answer"}, "missing field"),
        ({**ROW, "evidence_pages": [0]}, "evidence_pages"),
        ({**ROW, "evidence_pages": "3"}, "evidence_pages"),
        ({**ROW, "answer_format": "Number"}, "answer_format"),
    ],
)
def test_bad_rows_name_line_and_field(tmp_path: Path, row: dict, message: str) -> None:
    root = write(tmp_path / "set", [ROW, {**row, "qid": "q9"}])
    with pytest.raises(DatasetError, match=rf"qa.jsonl:2: .*{message}"):
        load_dataset(root)


def test_duplicate_qid_and_missing_pdf(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="duplicate qid"):
        load_dataset(write(tmp_path / "a", [ROW, ROW]))
    with pytest.raises(DatasetError, match="absent, e.g. b.pdf"):
        load_dataset(write(tmp_path / "b", [{**ROW, "doc": "b.pdf"}]))
    with pytest.raises(DatasetError, match="qa.jsonl: not found"):
        load_dataset(tmp_path / "nowhere")


def test_real_dev_set_loads(mmlongbench_dir: Path) -> None:
    ds = load_dataset(mmlongbench_dir)
    assert len(ds) == 357
    assert sum(item.scored_on_pages for item in ds) == 271


def test_split_is_the_fixed_sha256_rule(tmp_path: Path) -> None:
    import hashlib

    from llama_index_docmemo.evaluation.datasets import select_split, split_of

    names = [f"doc-{i}.pdf" for i in range(200)]
    for name in names:
        even = int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % 2 == 0
        assert split_of(name) == ("tune" if even else "report")
    halves = [split_of(n) for n in names]
    assert 70 < halves.count("tune") < 130  # both halves populated
    root = tmp_path / "ds"
    (root / "pdfs").mkdir(parents=True)
    rows = []
    for i, name in enumerate(names[:10]):
        (root / "pdfs" / name).write_bytes(b"%PDF")
        rows.append(
            {"qid": str(i), "doc": name, "question": "q", "answer": "a", "evidence_pages": [1]}
        )
    (root / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    data = load_dataset(root)
    tune, report = select_split(data, "tune"), select_split(data, "report")
    assert len(tune) + len(report) == 10 and select_split(data, "all") is data
    assert all(split_of(i.doc_id) == "tune" for i in tune) and all(
        split_of(i.doc_id) == "report" for i in report
    )
    with pytest.raises(DatasetError, match="split"):
        select_split(data, "dev")
