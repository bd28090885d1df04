"""The sibling count: questions whose gold pages another document reprints (a 10-K repeating the
year before's statements) are counted; short numbers and years never make two pages alike."""

from __future__ import annotations

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.siblings import page_figures, sibling_count

STATEMENT_2022 = "Net sales 1,577 13,233 2,044,100 Cost 9,068 4,411 Total 65,400 in 2022 and 2021"
STATEMENT_2023 = "Net sales 1,601 13,233 2,044,100 Cost 9,068 7,020 Total 70,000 in 2023 and 2022"


def item(qid: str, doc_id: str, pages: tuple[int, ...] = (2,)) -> QAItem:
    return QAItem(qid=qid, doc_id=doc_id, question="?", answer="1,577", evidence_pages=pages)


def test_page_figures_keep_long_numbers_and_leave_out_years_and_short_ones() -> None:
    text = "FY2022 sales 1,577.3 million (13,233 units, 12 stores, 5.1%), 2021: 20220"
    assert page_figures(text) == {"1577", "13233", "20220"}
    assert page_figures("1,2345") == frozenset()  # not a grouped number


def test_a_gold_page_half_reprinted_by_another_document_counts_that_document() -> None:
    pages = {
        "acme_2022.pdf": [(1, "cover"), (2, STATEMENT_2022)],
        "acme_2023.pdf": [(1, "cover"), (7, STATEMENT_2023)],  # 4 of 7 figures again
        "other.pdf": [(3, "Revenue 1,577 and 2022 2021 2020 12 13 14 5.1%")],
    }
    count = sibling_count([item("q", "acme_2022.pdf")], pages)
    assert (count.questions, count.decidable) == (1, 1)
    assert count.elsewhere == {"q": "acme_2023.pdf"}


def test_one_shared_figure_is_not_a_reprint_and_thin_pages_are_undecidable() -> None:
    pages = {
        "acme_2022.pdf": [(2, STATEMENT_2022), (3, "Total 1,577 and 2022")],
        "other.pdf": [(1, "Revenue 1,577 9,068 and little else 2022")],  # 2 of 7 figures
    }
    count = sibling_count([item("a", "acme_2022.pdf"), item("b", "acme_2022.pdf", (2, 3))], pages)
    assert (count.questions, count.decidable, count.elsewhere) == (2, 1, {})


def test_every_gold_page_must_be_reprinted_and_unscored_questions_are_left_out() -> None:
    pages = {
        "acme_2022.pdf": [(2, STATEMENT_2022), (4, "a 11,111 22,222 33,333 44,444 55,555")],
        "acme_2023.pdf": [(7, STATEMENT_2023)],
    }
    unanswerable = QAItem(
        qid="n", doc_id="acme_2022.pdf", question="?", answer="no", evidence_pages=()
    )
    count = sibling_count([item("q", "acme_2022.pdf", (2, 4)), unanswerable], pages)
    assert (count.questions, count.decidable, count.elsewhere) == (1, 1, {})
