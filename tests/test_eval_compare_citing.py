"""``docmemo compare``'s citations: DocMemo's own from its response, everyone else's (and a best
guess DocMemo did not stand by) by the same library rule over the pages they read."""

from __future__ import annotations

from llama_index_docmemo.evaluation.compare.citing import answer_citations
from llama_index_docmemo.evaluation.compare.engines import EngineReply
from llama_index_docmemo.evidence.citations import Citation, PageText
from llama_index_docmemo.trace import QueryTrace
from llama_index_docmemo.types import PageRef

P3, P7 = PageRef("a.pdf", 3), PageRef("a.pdf", 7)
PAGES = [
    PageText(P3, "Staff at year end: 1,184."),
    PageText(P7, "Revenue was 41.5 million in 2023."),
]
ANSWER = "Revenue was 41.5 million; staff 9,731."
OWN = Citation(text="own", kind="fact", doc_id="a.pdf", page=7, verified=True, how="text_layer")


def trace(status: str) -> QueryTrace:
    return QueryTrace(
        question="q", answer=ANSWER, status=status, stop_reason="answered", citations=[OWN]
    )


def claims(citations: list[Citation]) -> list[tuple[str, bool, int | None]]:
    return [(c.text, c.verified, c.page) for c in citations]


def test_a_stock_answer_is_checked_against_the_pages_it_read() -> None:
    reply = EngineReply(answer=ANSWER, cited=[P3, P7], read=[P3, P7])
    cited = answer_citations(reply, PAGES, {}, 0)
    assert claims(cited) == [("41.5 million", True, 7), ("9,731", False, None)]
    assert all(c.bbox is None for c in cited)  # no PDF on disk: no box, still verified


def test_docmemos_citations_are_its_own_unless_it_cited_no_claim() -> None:
    answered = EngineReply(answer=ANSWER, cited=[P7], read=[P3, P7], trace=trace("answered"))
    assert answer_citations(answered, PAGES, {}, 0) == [OWN]
    unanswerable = EngineReply(
        answer="Not found.", cited=[], read=[P3], trace=trace("unanswerable")
    )
    assert answer_citations(unanswerable, PAGES, {}, 0) == [OWN]
    # its best guess when the rounds ran out: the loop cites no claim, compare does, as for stock
    guess = EngineReply(answer=ANSWER, cited=[P7], read=[P3, P7], trace=trace("need_more"))
    cited = answer_citations(guess, PAGES, {}, 0)
    assert claims(cited) == [("41.5 million", True, 7), ("9,731", False, None), ("own", True, 7)]
