"""``docmemo compare`` end to end against the scripted OpenAI-compatible server.

Two generated PDFs in a nested folder are indexed into a real embedded store; DocMemo and the stock
LlamaIndex engines (``RetrieverQueryEngine`` over ``VectorStoreIndex`` / ``BM25Retriever``) answer
through the same ``QwenVL`` client; the server scripts the reader's JSON, the stock synthesizer's
text and the judge's replies. Cost is checked against what the server itself received.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
from fake_vllm_server import FakeVLLM, Reply, Request

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.cli import main as harness
from llama_index_docmemo.evaluation.compare import Question, compare
from llama_index_docmemo.llms import OpenAICompatible, QwenVL

pytestmark = pytest.mark.slow

MODEL = "qwen-vl-test"
FACTS = {
    ("alpha.pdf", 4): "Revenue of the Alpha company in 2023 was 41.5 million dollars.",
    ("alpha.pdf", 7): "Ann Smith has been the chief executive of Alpha since March 3, 2019.",
    ("beta.pdf", 3): "The Beta survey interviewed 2,500 adults by cellphone in 2022.",
}
FILLER = "This page describes the office garden, the weather in spring and the colour of the walls."
SHOWN = re.compile(r"\[(\d+)\] (\S+\.pdf), page (\d+)")


def make_pdf(path: Path, name: str, n_pages: int) -> None:
    pdf = pymupdf.open()
    for page in range(1, n_pages + 1):
        p = pdf.new_page()
        p.insert_textbox(
            pymupdf.Rect(72, 90, 540, 700),
            FACTS.get((name, page), f"{FILLER} {page}."),
            fontsize=11,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.save(path)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pilot") / "docs"
    make_pdf(root / "alpha.pdf", "alpha.pdf", 10)
    make_pdf(root / "surveys" / "beta.pdf", "beta.pdf", 8)
    return root


@pytest.fixture()
def questions(tmp_path: Path) -> Path:
    rows = [
        {
            "id": "rev",
            "question": "What was the revenue of Alpha in 2023?",
            "expected": "41.5 million",
        },
        {"id": "ceo", "question": "Who is the chief executive of Alpha?", "expected": "Ann Smith"},
        {"id": "survey", "question": "How many adults did the Beta survey interview by cellphone?"},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def is_judge(request: Request) -> bool:
    return "## Reference Answer" in request.text or "Assistant A’s Answer" in request.text


def scripted(request: Request) -> Reply:
    """Reader JSON for DocMemo, plain text for the stock synthesizer, verdicts for the judge."""
    text = request.text
    if "## Reference Answer" in text:
        reference = text.split("## Reference Answer\n")[1].split("\n## ")[0].strip()
        generated = text.split("## Generated Answer\n")[1].strip()
        return Reply("5.0\nSame." if reference.split()[0] in generated else "2.0\nDiffers.")
    if "Assistant A’s Answer" in text:
        first = text.split("Assistant A’s Answer]\n")[1].split("\n[The End")[0]
        return Reply("[[A]]" if "2,500" in first else "[[B]]")
    asked = re.search(r"(?:Question|Query): (.*)", text)  # DocMemo's prompt / LlamaIndex's
    question = asked.group(1) if asked else ""
    words = set(re.findall(r"[a-z]+", question.lower()))
    facts = sorted(
        (fact for fact in FACTS.values() if fact[:30] in text),
        key=lambda fact: -len(words & set(re.findall(r"[a-z]+", fact.lower()))),
    )
    if request.schema is not None:  # DocMemo's reader: label the pages shown, answer at once
        shown = {int(n): (doc, int(p)) for n, doc, p in SHOWN.findall(text)}
        useful = [n for n, (doc, p) in shown.items() if (Path(doc).name, p) in FACTS]
        reply = {
            "notes": [{"page": n, "fact": "evidence"} for n in useful],
            "useful_pages": useful,
            "irrelevant_pages": [n for n in shown if n not in useful],
            "missing": [],
            "status": "answered" if useful else "need_more",
            "answer": facts[0] if facts else None,
            "refined_query": None,
        }
        return Reply(json.dumps(reply))
    return Reply(f"From the context: {facts[0]}" if facts else "The context does not say.")


def llm(server: FakeVLLM) -> QwenVL:
    return QwenVL(model=MODEL, api_base=server.url, timeout=20, max_retries=0, max_tokens=512)


def test_compare_answers_costs_checks_judges_and_resumes(
    docs: Path, questions: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    engines = ["docmemo", "stock", "stock-bm25"]
    with FakeVLLM([], default=scripted, model=MODEL, require_schema=False) as server:
        judge = OpenAICompatible(model=MODEL, api_base=server.url, multimodal=False, max_retries=0)
        report = compare(
            docs,
            questions,
            out,
            engines=engines,
            llm=llm(server),
            judge_llm=judge,
            pages=6,
            progress=False,
        )
        assert not server.problems
        answering = [r for r in server.requests if not is_judge(r)]
        judging = [r for r in server.requests if is_judge(r)]
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert [(r["qid"], r["engine"]) for r in rows] == [
            (q, e) for q in ("rev", "ceo", "survey") for e in engines
        ]
        for row in rows:
            assert {
                "qid",
                "question",
                "engine",
                "answer",
                "cited_pages",
                "llm_calls",
                "prompt_tokens",
                "completion_tokens",
                "images",
                "seconds",
                "citations",
            } <= set(row)
            assert row["error"] is None and row["llm_calls"] >= 1 and row["seconds"] > 0
        # cost counted from LlamaIndex's events equals what the server received and reported
        assert sum(r["llm_calls"] for r in rows) == len(answering)
        assert sum(r["prompt_tokens"] for r in rows) == sum(
            max(1, len(r.text) // 4) for r in answering
        )
        assert sum(r["images"] for r in rows) == sum(len(r.image_sizes) for r in answering)
        by = {(r["qid"], r["engine"]): r for r in rows}
        assert by[("rev", "docmemo")]["images"] > 0  # DocMemo shows page images to a VLM
        assert all(by[(q, "stock")]["images"] == 0 for q in ("rev", "ceo", "survey"))
        rev = by[("rev", "docmemo")]
        assert {"doc_id": "alpha.pdf", "page": 4} in rev["cited_pages"]
        # every engine's answer carries its citations, checked and boxed by the same code, in
        # results.jsonl and in report.json
        answers = {(a["qid"], a["engine"]): a for a in report["answers"]}
        saved = json.loads((out / "report.json").read_text())["answers"]
        assert saved == report["answers"] and set(answers) == set(by)
        for engine in engines:
            for cited in (by[("rev", engine)]["citations"], answers[("rev", engine)]["citations"]):
                figures = {c["text"]: c for c in cited if c["kind"] == "figure"}
                revenue = figures["41.5 million"]
                assert revenue["verified"] and figures["2023"]["verified"], (engine, cited)
                assert (revenue["doc_id"], revenue["page"], revenue["box_from"]) == (
                    "alpha.pdf",
                    4,
                    "search_for",
                )
                x0, y0, x1, y1 = revenue["bbox"]
                assert 72 <= x0 < x1 <= 540 and 90 <= y0 < y1 <= 700  # the fact's text box
        stock_rev = by[("rev", "stock-bm25")]
        assert stock_rev["answer"].startswith("From the context") and stock_rev["cited_pages"]
        # the number rule decides "41.5 million", the judge model "Ann Smith"
        assert rev["correctness"]["method"] == "number rule" and rev["correctness"]["passing"]
        ceo = by[("ceo", "docmemo")]["correctness"]
        assert ceo["method"] == "correctness" and ceo["judge"] == MODEL
        survey = by[("survey", "docmemo")]["pairwise"]
        assert set(survey) == {"stock", "stock-bm25"}
        assert all(v["judge"] == MODEL and v["first"] in ("a", "b", "tie") for v in survey.values())
        assert by[("survey", "stock")]["pairwise"]["docmemo"]["result"] in ("win", "loss", "tie")
        totals = report["totals"]
        assert set(totals["engines"]) == set(engines) and set(totals["versus"]) == {
            "stock",
            "stock-bm25",
        }
        assert totals["engines"]["docmemo"]["correct"]["judged_by"] == sorted({"rule", MODEL})
        assert "tokens" in report["budgets"]["stock"] and "pages" in report["budgets"]["docmemo"]
        page = (out / "report.html").read_text()
        assert "<script" not in page and not re.search(
            r"""(src|href)=["']?(https?:)?//|url\(""", page
        )
        assert page.count('class="answer"') == 9 and "Belief heat-map" in page
        thumbnails = re.findall(r'<img src="(pages/[^"]+)"', page)
        assert thumbnails and all((out / t).is_file() for t in thumbnails)
        md = (out / "report.md").read_text()
        assert "| docmemo |" in md and "Judge: **qwen-vl-test**" in md
        # resumed: nothing asked again, the same results
        asked = len(server.requests)
        again = compare(
            docs,
            questions,
            out,
            engines=engines,
            llm=llm(server),
            judge_llm=judge,
            pages=6,
            progress=False,
        )
        assert len(server.requests) == asked and again["totals"] == report["totals"]
        assert len(judging) > 0
    with pytest.raises(DocMemoError, match="different pages"):
        compare(docs, questions, out, engines=engines, llm=llm(server), pages=9, progress=False)


def test_failed_engine_is_recorded_and_the_command_exits_1(
    docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text("# one question a line\nWhat was the revenue of Alpha in 2023?\n")

    def stock_fails(request: Request) -> Reply:
        return scripted(request) if request.schema is not None else Reply(status=500)

    with FakeVLLM([], default=stock_fails, model=MODEL, require_schema=False) as server:
        code = harness(
            "compare",
            [
                "--docs",
                str(docs),
                "--questions",
                str(questions),
                "--out",
                str(tmp_path / "o"),
                "--llm-url",
                server.url,
                "--llm-model",
                MODEL,
                "--no-progress",
                "--pages",
                "6",
            ],
        )
    assert code == 1
    rows = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert [r["engine"] for r in rows] == ["docmemo", "stock"]
    assert rows[0]["error"] is None and "LLMError" in rows[1]["error"]
    assert rows[1]["correctness"] is None and rows[1]["llm_calls"] >= 1
    printed = capsys.readouterr().out
    assert "Judge: none" in printed and "report.html" in printed


def scanned_pdf(path: Path, slides: list[str]) -> None:
    """Pages that are only an image of text (no text layer): what a scanned deck looks like."""
    pdf = pymupdf.open()
    for text in slides:
        scratch = pymupdf.open()
        drawn = scratch.new_page(width=720, height=540)
        drawn.insert_text((40, 140), text, fontsize=30)
        page = pdf.new_page(width=720, height=540)
        page.insert_image(page.rect, stream=drawn.get_pixmap(dpi=150).tobytes("png"))
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.save(path)


@pytest.mark.skipif(
    not shutil.which("tesseract"), reason="no Tesseract (apt-get install tesseract-ocr)"
)
def test_stock_ocr_separates_the_method_from_ocr(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    make_pdf(docs / "alpha.pdf", "alpha.pdf", 4)
    scanned_pdf(docs / "deck.pdf", ["Agenda and welcome", "Gamma revenue was 77 million", "Thanks"])
    questions = [Question("gamma", "What was the Gamma revenue?")]
    out = tmp_path / "out"
    with FakeVLLM([], default=scripted, model=MODEL, require_schema=False) as server:
        report = compare(
            docs,
            questions,
            out,
            engines=["docmemo", "stock", "stock-ocr"],
            llm=llm(server),
            pages=3,
            progress=False,
        )
    rows = {
        r["engine"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    deck = lambda row: [p for p in row["cited_pages"] if p["doc_id"] == "deck.pdf"]  # noqa: E731
    assert not deck(rows["stock"])  # pypdf reads no text on a scanned page: never retrieved
    assert {"doc_id": "deck.pdf", "page": 2} in deck(rows["stock-ocr"])  # the store's OCR text
    assert {"doc_id": "deck.pdf", "page": 2} in rows["docmemo"]["read_pages"]
    assert (
        report["ocr_pages"] == 3 and "from the page store's text" in report["budgets"]["stock-ocr"]
    )
    assert "3 of 7 pages have no text layer" in (out / "report.md").read_text()
    assert "not judged" in (out / "report.md").read_text()  # no expected answer, no judge


def test_the_example_script_compares_with_settings_llm(
    docs: Path, questions: Path, tmp_path: Path
) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "compare_engines.py"
    with FakeVLLM([], default=scripted, model=MODEL, require_schema=False) as server:
        done = subprocess.run(
            [
                sys.executable,
                str(example),
                str(docs),
                str(questions),
                str(tmp_path / "out"),
                "--llm-url",
                server.url,
                "--llm-model",
                MODEL,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(example.parent.parent)},
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "docmemo: correct" in done.stdout and "stock-ocr: correct" in done.stdout
    assert (tmp_path / "out" / "report.html").is_file()
