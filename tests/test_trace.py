"""Saved records name a document by ``doc_id``; those 0.2.0 saved (field ``doc``) still read."""

from __future__ import annotations

import json
from pathlib import Path

from llama_index_docmemo.evaluation.compare.records import load_records
from llama_index_docmemo.trace import QueryTrace

OLD_TRACE = Path(__file__).parent / "fixtures" / "trace_doc_field.json"  # dumped by 0.2.0


def _doc_fields(value: object) -> list[str]:
    """The document ids of every record in a trace's JSON, under either name, in order."""
    if isinstance(value, list):
        return [d for v in value for d in _doc_fields(v)]
    if not isinstance(value, dict):
        return []
    own = [value[k] for k in ("doc", "doc_id") if isinstance(value.get(k), str)]
    return own + [d for v in value.values() for d in _doc_fields(v)]


def test_a_trace_saved_by_0_2_0_reads_with_its_document_ids() -> None:
    saved = json.loads(OLD_TRACE.read_text(encoding="utf-8"))
    trace = QueryTrace.model_validate(saved)
    first = trace.rounds[0]
    assert {c.doc_id for c in first.candidates} == {"report.pdf", "report-copy.pdf"}
    assert [d.doc_id for d in first.documents] == [
        d["doc"] for d in saved["rounds"][0]["documents"]
    ]
    assert trace.pages_read[0].doc_id == saved["pages_read"][0]["doc"]
    assert first.beliefs[0].doc_id == saved["rounds"][0]["beliefs"][0]["doc"]
    dumped = trace.model_dump(mode="json")
    assert _doc_fields(dumped) == _doc_fields(saved)  # every id kept, in the same places
    text = json.dumps(dumped)
    assert '"doc":' not in text and '"doc_id":' in text
    assert QueryTrace.model_validate_json(text) == trace


def test_compare_results_saved_by_0_2_0_resume(tmp_path: Path) -> None:
    """An interrupted ``docmemo compare`` of 0.2.0 resumes: its answers are not dropped and re-asked."""
    line = {
        "qid": "q1",
        "question": "Revenue?",
        "engine": "docmemo",
        "answer": "4.2 million",
        "cited_pages": [{"doc": "a.pdf", "page": 4}],
        "read_pages": [{"doc": "a.pdf", "page": 4}, {"doc": "b.pdf", "page": 1}],
    }
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    record = load_records(path)[("q1", "docmemo")]
    assert [(p.doc_id, p.page) for p in record.read_pages] == [("a.pdf", 4), ("b.pdf", 1)]
    assert record.model_dump(mode="json")["cited_pages"] == [{"doc_id": "a.pdf", "page": 4}]
