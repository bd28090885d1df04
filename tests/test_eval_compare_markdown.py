"""``report.md`` of ``docmemo compare`` keeps text from questions, answers and PDFs inert."""

from __future__ import annotations

from llama_index_docmemo.evaluation.compare.markdown import render_markdown
from llama_index_docmemo.evaluation.compare.questions import Question
from llama_index_docmemo.evaluation.compare.records import AnswerRecord, PageCitation
from llama_index_docmemo.evaluation.compare.totals import compare_totals
from llama_index_docmemo.evidence.citations import Citation

SCRIPT = "<script>alert(1)</script>"


def test_html_and_links_from_questions_answers_and_pdfs_are_escaped() -> None:
    page = PageCitation(doc_id=f"{SCRIPT}.pdf", page=2)
    records = {
        engine: [
            AnswerRecord(
                qid="q<1>",
                question=f"What? {SCRIPT}",
                engine=engine,
                answer=f"It is 42 | {SCRIPT}\nsee [here](javascript:alert(1)) & <img src=x onerror=alert(1)>",
                cited_pages=[page],
                citations=[
                    Citation(
                        text=f"42{SCRIPT}",
                        kind="figure",
                        doc_id=page.doc_id,
                        page=page.page,
                        verified=True,
                        how="text_layer",
                    )
                ],
                correctness={"passing": True, "method": "correctness", "judge": f"j{SCRIPT}"},
            )
        ]
        for engine in ("docmemo", "stock")
    }
    meta = {
        "engines": ["docmemo", "stock"],
        "docs": f"pdfs/{SCRIPT}",
        "pages_in_store": 3,
        "questions": 1,
        "llm": f"model{SCRIPT}",
        "judge": f"judge{SCRIPT}",
        "budgets": {"docmemo": f"4 rounds {SCRIPT}", "stock": "top 5"},
    }
    questions = [Question(qid="q<1>", text=f"What? {SCRIPT}", expected=f"42 {SCRIPT}")]
    by_question = {"q<1>": [records["docmemo"][0], records["stock"][0]]}
    report = render_markdown(meta, compare_totals(records, "docmemo"), questions, by_question)

    assert "<" not in report and ">" not in report.replace("&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    assert report.count("](javascript:") == report.count("\\](javascript:") == 2
    assert "&amp; &lt;img src=x onerror=alert(1)&gt;" in report
    assert "### q&lt;1&gt;: What? &lt;script&gt;" in report
    answer_rows = [line for line in report.splitlines() if line.startswith("| docmemo | It is")]
    assert len(answer_rows) == 1  # one row: the newline joined, the pipe escaped
    assert answer_rows[0].count(" | ") == 5 and "42 \\| &lt;script&gt;" in answer_rows[0]
    assert "**model&lt;script&gt;" in report  # Markdown emphasis kept
