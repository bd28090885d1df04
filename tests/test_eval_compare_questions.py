"""A pilot's questions in three formats, errors naming file, line and field; the comparison totals."""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_index_docmemo.evaluation.compare.questions import (
    Question,
    QuestionsError,
    load_questions,
)
from llama_index_docmemo.evaluation.compare.records import AnswerRecord
from llama_index_docmemo.evaluation.compare.run import check_engines, docmemo_configs
from llama_index_docmemo.evaluation.compare.totals import compare_totals
from llama_index_docmemo.evidence.citations import Citation


def test_jsonl_csv_and_txt(tmp_path: Path) -> None:
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text(
        '{"id": "a", "question": "Revenue  in\\n2023?", "expected": "4.2"}\n\n'
        '{"qid": "b", "question": "Who?", "answer": "Ann"}\n{"question": "Why?"}\n'
    )
    assert load_questions(jsonl) == [
        Question("a", "Revenue in 2023?", "4.2"),
        Question("b", "Who?", "Ann"),
        Question("q4", "Why?", None),
    ]
    csv = tmp_path / "q.csv"
    csv.write_text('Question,Expected\n"Revenue, in 2023?",4.2\nWho?,\n')
    assert load_questions(csv) == [
        Question("q2", "Revenue, in 2023?", "4.2"),
        Question("q3", "Who?"),
    ]
    txt = tmp_path / "q.txt"
    txt.write_text("# pilot questions\nRevenue in 2023?\n\n  Who is the CEO?\n")
    assert [q.text for q in load_questions(txt)] == ["Revenue in 2023?", "Who is the CEO?"]
    assert [q.qid for q in load_questions(txt)] == ["q2", "q4"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("q.jsonl", '{"question": "a"}\n{"question": \n', r"q\.jsonl:2: not valid JSON"),
        ("q.jsonl", '{"expected": "4"}\n', r"q\.jsonl:1: no question"),
        ("q.jsonl", '["a"]\n', r"q\.jsonl:1: expected a JSON object"),
        (
            "q.jsonl",
            '{"id": "x", "question": "a"}\n{"id": "x", "question": "b"}\n',
            r":2: id 'x'.*:1",
        ),
        ("q.csv", "query,expected\nx,1\n", r"q\.csv: the header row has no 'question' column"),
        ("q.txt", "# only a comment\n", r"q\.txt: no questions"),
        ("q.xlsx", "x", r"must be a \.jsonl, \.csv or \.txt"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(QuestionsError, match=message):
        load_questions(path)
    with pytest.raises(QuestionsError, match="no such questions file"):
        load_questions(tmp_path / "absent.txt")


def test_engine_names_and_budget() -> None:
    assert check_engines(["docmemo", " stock", "docmemo", ""]) == ["docmemo", "stock"]
    with pytest.raises(ValueError, match="unknown engine.*bogus"):
        check_engines(["docmemo", "bogus"])
    fifteen = docmemo_configs(15).for_engine("docmemo")
    assert (fifteen.loop.rounds, fifteen.loop.pages_per_round, fifteen.budget.max_pages) == (
        3,
        5,
        None,
    )
    ten = docmemo_configs(10).for_engine("docmemo")
    assert (ten.loop.pages_per_round, ten.budget.max_pages) == (4, 10)
    with pytest.raises(ValueError, match="--pages"):
        docmemo_configs(0)


def record(
    qid: str, engine: str, passing: bool | None, found: list[bool], calls: int
) -> AnswerRecord:
    return AnswerRecord(
        qid=qid,
        question="q",
        engine=engine,
        answer="a",
        llm_calls=calls,
        citations=[
            Citation(text="1", kind="figure", doc_id=None, page=None, verified=f, how="not_found")
            for f in found
        ]
        # a name of the answer: never counted among its figures
        + [
            Citation(
                text="Ann Smith",
                kind="name",
                doc_id=None,
                page=None,
                verified=False,
                how="not_found",
            )
        ],
        correctness=None
        if passing is None
        else {"passing": passing, "method": "correctness", "judge": "judge-model"},
    )


def test_totals_are_paired_over_shared_questions_and_name_the_judge() -> None:
    docmemo = [
        record("a", "docmemo", True, [True, True], 3),
        record("b", "docmemo", True, [True, False], 3),
        record("c", "docmemo", False, [], 4),
    ]
    stock = [
        record("a", "stock", False, [False], 1),
        record("b", "stock", True, [True], 1),
        record("c", "stock", None, [True], 1),  # not judged: left out of the paired correctness
    ]
    docmemo[2].pairwise["stock"] = {"result": "win", "judge": "judge-model"}
    totals = compare_totals({"docmemo": docmemo, "stock": stock}, "docmemo")
    dm, st = totals["engines"]["docmemo"], totals["engines"]["stock"]
    assert dm["correct"]["mean"] == pytest.approx(2 / 3) and dm["correct"]["judged_by"] == [
        "judge-model"
    ]
    assert st["correct"]["n"] == 2 and (dm["figures"], dm["figures_verified"]) == (4, 3)
    assert dm["figures_verified_share"]["mean"] == pytest.approx(0.75)  # per answer: 1, .5
    versus = totals["versus"]["stock"]
    assert versus["correct"]["n"] == 2 and versus["correct"]["diff"] == pytest.approx(0.5)
    assert versus["figures_verified_share"]["n"] == 2  # c: DocMemo stated no figure
    assert versus["figures_verified_share"]["diff"] == pytest.approx(((1 - 0) + (0.5 - 1)) / 2)
    assert versus["cost"]["llm_calls"]["diff"] == pytest.approx(7 / 3)
    lo, hi = versus["cost"]["llm_calls"]["ci"]
    assert lo <= 7 / 3 <= hi
    assert (versus["pairwise"]["win"], versus["pairwise"]["tie"], versus["pairwise"]["loss"]) == (
        1,
        0,
        0,
    )
    assert versus["pairwise"]["judged_by"] == ["judge-model"]


def test_verdict_words_say_why_an_answer_was_not_judged() -> None:
    from llama_index_docmemo.evaluation.compare.markdown import verdict_text

    failed = record("a", "docmemo", True, [], 0).model_copy(update={"error": "ContextWindowError"})
    assert verdict_text(failed) == "not judged: the engine gave no answer"
    no_score = record("a", "stock", None, [], 1).model_copy(
        update={"correctness": {"passing": None, "method": "correctness", "judge": "m"}}
    )
    assert verdict_text(no_score) == "not judged (correctness: m gave no verdict)"
    assert verdict_text(record("a", "stock", False, [], 1)) == "wrong (correctness, judge-model)"
