"""The judge through LlamaIndex's evaluators against a local OpenAI-compatible server: rules first,
CorrectnessEvaluator and PairwiseComparisonEvaluator (both orders) on the real client, caching,
errors naming the URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_vllm_server import FakeVLLM, Reply, Request

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.judge import AnswerJudge, VerdictCache, judge_runs
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.llms.openai_compatible import OpenAICompatible

MODEL = "judge-test"
ITEMS = [
    QAItem("a", "d.pdf", "Revenue?", "4.2 million", (1,)),
    QAItem("b", "d.pdf", "Who is the CEO?", "Ann Smith", (2,)),
    QAItem("c", "d.pdf", "Favourite colour?", "Not answerable", ()),
]


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n")[1].split("\n## ")[0].strip()


def grade(request: Request) -> Reply:
    """LlamaIndex's correctness template: 5 when the generated answer holds the reference."""
    reference = section(request.text, "Reference Answer")
    generated = section(request.text, "Generated Answer")
    return Reply("5.0\nSame person." if reference.split()[0] in generated else "1.0\nWrong.")


def judge_for(server: FakeVLLM) -> AnswerJudge:
    llm = OpenAICompatible(
        model=MODEL, api_base=server.url, multimodal=False, timeout=5, max_retries=0
    )
    return AnswerJudge(llm)


def test_rules_decide_numbers_and_abstentions_without_asking() -> None:
    with FakeVLLM([], default=grade, model=MODEL, require_schema=False) as server:
        judge = judge_for(server)
        number = judge.correctness("Revenue?", "4.2 million", "It was $4,200,000 in 2023.")
        assert (number.passing, number.method, number.judge) == (True, "number rule", "rule")
        assert judge.correctness("Revenue?", "4.2 million", "It was 4.5 million.").passing is False
        assert judge.correctness("Margin?", "12.5%", "about 0.125").passing is True
        # a name's number is not a figure: "GPT-4" does not answer "4"
        gpt4 = "With GPT-4, on how many datasets does it win?"
        assert judge.correctness(gpt4, "4", "GPT-4 wins on 2 of them.").passing is False
        assert judge.correctness(gpt4, "4", "On 4 datasets.").passing is True
        abstained = judge.correctness("Colour?", "Not answerable", "It is not stated anywhere.")
        assert (abstained.passing, abstained.method) == (True, "abstention rule")
        assert judge.correctness("Colour?", "Not answerable", "Blue.").passing is False
        assert not server.requests  # no rule needed the model
        assert AnswerJudge(None).correctness("CEO?", "Ann", "Bob").method == "not judged"


def test_correctness_evaluator_judges_free_form_answers_and_caches(tmp_path: Path) -> None:
    runs = {
        "docmemo": [
            QuestionRun("docmemo", "a", reads=[], answer="It was 4.2 million dollars"),
            QuestionRun("docmemo", "b", reads=[], answer="Bob Jones"),
            QuestionRun("docmemo", "c", reads=[], answer=None),  # no answer: an abstention
        ],
        "static-paged": [
            QuestionRun("static-paged", "b", reads=[], answer="Ann Smith, since 2019")
        ],
    }
    with FakeVLLM([], default=grade, model=MODEL, require_schema=False) as server:
        judge = judge_for(server)
        verdict = judge.correctness("Who is the CEO?", "Ann Smith", "Ann Smith, since 2019")
        assert (verdict.passing, verdict.score, verdict.judge) == (True, 5.0, MODEL)
        assert verdict.method == "correctness" and "Same person" in verdict.feedback
        cache = VerdictCache(tmp_path / "judge.jsonl")
        accuracy = judge_runs(runs, ITEMS, judge, cache)
        assert accuracy == {"docmemo": pytest.approx(2 / 3), "static-paged": 1.0}
        asked = len(server.requests)
        assert asked == 3 and not server.problems  # b twice (1 + docmemo's), the rest by rules
        again = judge_runs(runs, ITEMS, judge, VerdictCache(tmp_path / "judge.jsonl"))
        assert again == accuracy and len(server.requests) == asked  # read back from judge.jsonl
    assert len((tmp_path / "judge.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize(
    "reply", ["I cannot say.", "The answer gives 31,337 and 4,242; the reference gives 12."]
)
def test_a_reply_without_a_score_is_recorded_as_unparseable(reply: str) -> None:
    with FakeVLLM([Reply(reply)], model=MODEL, require_schema=False) as server:
        verdict = judge_for(server).correctness("CEO?", "Ann Smith", "Bob")
    assert verdict.passing is None and verdict.score is None
    assert verdict.method == "unparseable reply" and verdict.feedback == reply


def prefer(word: str):
    """A pairwise judge that picks the answer containing ``word``, wherever it is shown."""

    def reply(request: Request) -> Reply:
        first = request.text.split("Assistant A’s Answer]\n")[1].split("\n[The End")[0]
        return Reply("A is better. [[A]]" if word in first else "B is better. [[B]]")

    return reply


def test_pairwise_asks_both_orders_and_position_bias_ties() -> None:
    with FakeVLLM([], default=prefer("Ann"), model=MODEL, require_schema=False) as server:
        verdict = judge_for(server).pairwise("CEO?", "Bob Jones", "Ann Smith")
        assert (verdict.winner, verdict.first, verdict.second) == ("b", "b", "b")
        assert len(server.requests) == 2 and verdict.judge == MODEL
        texts = [r.text for r in server.requests]
        assert texts[0].index("Bob Jones") < texts[0].index("Ann Smith")
        assert texts[1].index("Ann Smith") < texts[1].index("Bob Jones")
    always_first = Reply("[[A]]")
    with FakeVLLM([], default=always_first, model=MODEL, require_schema=False) as server:
        verdict = judge_for(server).pairwise("CEO?", "Bob Jones", "Ann Smith")
    assert (verdict.winner, verdict.first, verdict.second) == ("tie", "a", "b")


def test_judge_errors_name_the_url() -> None:
    with (
        FakeVLLM([Reply(status=500)], model=MODEL, require_schema=False) as server,
        pytest.raises(LLMError, match=r"127\.0\.0\.1"),
    ):
        judge_for(server).correctness("q", "Ann Smith", "b")
