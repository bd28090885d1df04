"""The ``docmemo`` command end to end: index (with a bad file), search, ask (JSON, trace, VLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_vllm_server import FakeVLLM, Reply

from llama_index_docmemo.cli import main
from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    docs = root / "docs"
    docs.mkdir()
    write_demo_pdf(docs / "report.pdf")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not a real PDF body")
    store = root / "store"
    code = main(["index", str(docs), "--store", str(store), "--quiet"])
    assert code == 1  # one file failed; the other was still indexed
    return store, docs


def test_index_reports_failures_and_keeps_the_rest(indexed, capsys) -> None:
    store, docs = indexed
    code = main(["index", str(docs / "report.pdf"), "--store", str(store), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and "1 unchanged" in out and "0 failed" in out


def test_search_json_shape(indexed, capsys) -> None:
    store, _ = indexed
    assert main(["search", "Tampere plant serial production", "--store", str(store), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and set(rows[0]) == {"doc_id", "page", "score"}
    assert rows[0]["doc_id"] == "report.pdf" and rows[0]["page"] == 9
    assert main(["search", "Tampere", "--store", str(store), "--doc", "other.pdf", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_ask_json_and_trace(indexed, capsys, tmp_path: Path) -> None:
    store, _ = indexed
    question = DEMO_QUESTIONS[0]
    trace = tmp_path / "trace.html"
    args = ["ask", question.question, "--store", str(store), "-k", "3", "--json"]
    assert main([*args, "--trace", str(trace)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "answer",
        "evidence",
        "citations",
        "abstained",
        "rounds",
        "stop_reason",
        "error",
        "pages_read",
        "reader",
        "images",
    }
    assert out["reader"] == "offline" and out["images"] is False and out["error"] is None
    read = {p["page"] for p in out["pages_read"]}
    assert set(question.evidence_pages) <= read
    assert out["rounds"] >= 2 and out["stop_reason"] == "answered"
    assert "35.8" in out["answer"]
    assert trace.is_file() and "<html" in trace.read_text().lower()


def test_ask_with_llm_url_uses_the_vlm(indexed, capsys) -> None:
    store, _ = indexed

    def reply(request) -> Reply:
        if "summar" in request.text.lower() and "pages" not in (request.schema or {}).get(
            "properties", {}
        ):
            return Reply(json.dumps({"summaries": []}))
        feedback = {
            "notes": [{"page": 1, "fact": "the plant started on 14 March 2024"}],
            "useful_pages": [1],
            "irrelevant_pages": [],
            "missing": [],
            "status": "answered",
            "answer": "14 March 2024",
            "refined_query": None,
        }
        return Reply(json.dumps(feedback))

    with FakeVLLM([], default=reply, model="qwen-vl-test") as server:
        code = main(
            [
                "ask",
                "When did the Tampere plant start serial production?",
                "--store",
                str(store),
                "--json",
                "--llm-url",
                server.url,
                "--llm-model",
                "qwen-vl-test",
            ]
        )
        assert code == 0 and not server.problems
        assert server.requests and all(r.image_sizes for r in server.requests)
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] == "14 March 2024" and out["stop_reason"] == "answered"


def test_unknown_store_encoder_is_a_clear_error(tmp_path: Path, capsys) -> None:
    code = main(["search", "x", "--store", str(tmp_path / "s"), "--encoder", "nope"])
    assert code == 2
    assert "unknown encoder name" in capsys.readouterr().err


def test_ask_without_a_store_or_with_an_empty_scope_is_a_clear_error(indexed, tmp_path, capsys):
    store, _ = indexed
    assert main(["ask", "q?", "--store", str(tmp_path / "missing")]) == 2
    assert "no page store at" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()  # nothing created by a read command
    assert main(["ask", "q?", "--store", str(store), "--doc", "nope.pdf"]) == 2
    err = capsys.readouterr().err
    assert "no pages visible" in err and "report.pdf" in err


@pytest.mark.parametrize(
    "reply",
    [
        Reply("The plant started in March, I think."),  # never the JSON asked for
        Reply(body=b"<html><body>Bad Gateway</body></html>", content_type="text/html"),
        Reply(body=b'{"choices": []}'),
    ],
)
def test_ask_against_a_server_whose_replies_are_unusable_fails_in_one_line(
    indexed, capsys, reply: Reply
) -> None:
    """Never "Not found" with exit 0, never a traceback: the error names the server."""
    store, _ = indexed
    with FakeVLLM([], default=reply, model="qwen-vl-test", require_schema=False) as server:
        code = main(
            [
                "ask",
                "When did the Tampere plant start serial production?",
                "--store",
                str(store),
                "--llm-url",
                server.url,
                "--llm-model",
                "qwen-vl-test",
            ]
        )
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("docmemo:")]
    assert code != 0 and len(errors) == 1 and "Traceback" not in captured.err
    assert server.url in errors[0] and "qwen-vl-test" in errors[0]
