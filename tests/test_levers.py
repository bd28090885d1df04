"""The levers' pure logic: fusion, sub-queries, reference graph, named pages, statements."""

from __future__ import annotations

import pytest

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.levers.references import reference_boosts
from llama_index_docmemo.levers.statements import fuse_rankings, unit_scores
from llama_index_docmemo.memory.belief import PageBeliefMemory
from llama_index_docmemo.memory.schema import (
    build_reference_graph,
    continues_next,
    label_definitions,
    label_mentions,
)
from llama_index_docmemo.types import PageRef

# ---------------------------------------------------------------- fusion


def test_unit_scores_put_the_best_at_one() -> None:
    assert unit_scores({"a": 2.0, "b": 1.0}) == {"a": 1.0, "b": 0.5}
    assert unit_scores({"a": -1.0, "b": 1.0}) == {"a": 0.0, "b": 1.0}
    assert unit_scores({"a": 0.0}) == {"a": 1.0}
    assert unit_scores({}) == {}


def test_fusion_max_keeps_the_strongest_signal_and_adds_new_pages() -> None:
    base = {"a": 1.0, "b": 0.5}
    fused = fuse_rankings(base, [({"c": 4.0, "b": 2.0}, 0.6)], "max")
    assert fused == pytest.approx({"a": 1.0, "c": 0.6, "b": 0.5})
    assert list(fused) == ["a", "c", "b"]


def test_fusion_sum_rewards_agreement() -> None:
    fused = fuse_rankings({"a": 1.0, "b": 0.9}, [({"b": 1.0}, 0.5)], "sum")
    assert list(fused) == ["b", "a"]
    assert fused["b"] == pytest.approx(1.4)


def test_fusion_ties_keep_first_appearance_and_reject_negative_weights() -> None:
    assert list(fuse_rankings({"x": 1.0, "y": 1.0}, [({"z": 1.0}, 1.0)])) == ["x", "y", "z"]
    with pytest.raises(ValueError):
        fuse_rankings({"a": 1.0}, [({"b": 1.0}, -1.0)])


# ---------------------------------------------------------------- configuration


def test_defaults_are_the_tuned_combination_and_paper_turns_it_off() -> None:
    defaults = DocMemoConfig()  # the combination chosen on the tuning half
    levers = defaults.levers
    assert levers.question_reference_weight > 0 and levers.reference_weight > 0
    assert levers.statement_weight > 0 and levers.searching
    paper = DocMemoConfig.paper().levers
    assert paper.question_reference_weight == 0
    assert paper.reference_weight == 0 and paper.statement_weight == 0 and not paper.searching


@pytest.mark.parametrize(
    "removed",
    [
        "feedback_search",
        "later_candidates",
        "schema_field_weight",
        "prior_calibration",
        "prior_strength",
        "subqueries",
        "subquery_weight",
    ],
)
def test_removed_switches_are_refused_by_name(removed: str) -> None:
    with pytest.raises(ValueError, match=f"no setting {removed!r}"):
        DocMemoConfig(**{removed: 1})


# ---------------------------------------------------------------- reference graph


def test_mentions_and_definitions() -> None:
    text = "Revenue grew (see Table 3 and Figures 4).\nTable 5: Segment results\nNote 12 – Leases"
    assert label_mentions(text) >= {("table", "3"), ("figure", "4"), ("table", "5")}
    assert label_definitions(text) == {("table", "5"), ("note", "12")}
    assert label_definitions("The table 3 shows growth") == set()


def test_graph_links_mentions_to_the_page_defining_the_label() -> None:
    texts = {
        1: "Summary. Details are in Note 12 and Table 2.",
        2: "Intro text",
        3: "Table 2: Revenue by segment\nA 1 2",
        7: "Note 12 Leases\nThe company leases offices.",
        8: "Figure 1. Map",
        9: "Figure 1. Map (second copy)\nFigure 1: again",
        10: "As Figure 1 shows",
    }
    graph = build_reference_graph(texts, max_targets=1)
    assert graph.linked(1) == {3: "label", 7: "label"}
    assert graph.linked(7) == {1: "label"}
    assert graph.linked(10) == {}  # "Figure 1" is defined on two pages: ambiguous at max 1


def test_continuations_link_consecutive_pages() -> None:
    assert continues_next("Balance sheet", "Balance sheet (continued)\nAssets 1 2")
    assert continues_next("Table ends here, continued on next page", "New text")
    rows_end = "Item\nCash 1,200 1,100\nDebt 300 (250)\nEquity 5.2% 4.1%"
    rows_start = "Loans 10 20\nOther 3 4\nTotal 1,513 1,374"
    assert continues_next(rows_end, rows_start)
    assert not continues_next("A paragraph of prose.", "Another paragraph of prose.")
    graph = build_reference_graph({4: rows_end, 5: rows_start, 6: "prose"})
    assert graph.linked(5) == {4: "continuation"}
    assert len(graph) == 1


def test_reference_boosts_sum_over_useful_pages_and_skip_seeds() -> None:
    graph = build_reference_graph(
        {1: "see Table 2", 2: "Table 2: X", 3: "cf. Table 2", 4: "Balance (continued)"}
    )
    useful = [PageRef("d", 1), PageRef("d", 3), PageRef("d", 2)]
    assert reference_boosts(useful, {"d": graph}, weight=1.0) == {PageRef("d", 4): 1.0}
    boosts = reference_boosts(
        [PageRef("d", 1), PageRef("d", 3), PageRef("d", 4)],
        {"d": graph},
        weight=1.5,
        continuation_weight=0.5,
    )
    assert boosts == {PageRef("d", 2): 3.0}  # page 4 continues page 3, a seed itself
    boosts = reference_boosts([PageRef("d", 4)], {"d": graph}, weight=1.5, continuation_weight=0.5)
    assert boosts == {PageRef("d", 3): 0.5}
    with pytest.raises(ValueError):
        reference_boosts([], {}, weight=-1.0)


def test_add_alpha_moves_only_pages_in_scope() -> None:
    beliefs = PageBeliefMemory({"d": 3})
    beliefs.add_alpha({PageRef("d", 2): 2.0, PageRef("other", 1): 5.0, PageRef("d", 9): 1.0})
    assert beliefs.get(PageRef("d", 2)) == (3.0, 1.0)
    assert beliefs.informed_refs() == [PageRef("d", 2)]
    with pytest.raises(ValueError):
        beliefs.add_alpha({PageRef("d", 1): -1.0})


# ---------------------------------------------------------------- pages the question names


def test_named_pages_read_pages_slides_ranges_and_covers() -> None:
    from llama_index_docmemo.levers.references import named_pages

    assert named_pages("In the cartoon in page 25, what does the hippo represent?", 60) == [25]
    assert named_pages("How many figures are there from Page 3 to Page 6?", 60) == [3, 4, 5, 6]
    assert named_pages("In slides 4-6, which colour?", 60) == [4, 5, 6]
    assert named_pages("What colour is the car on the cover?", 60) == [1]
    assert named_pages("What is written on the last page?", 60) == [60]
    assert named_pages("What is on the back cover?", 60) == [60]
    assert named_pages("What is on page 99?", 60) == []  # outside the document
    assert named_pages("pages 1 to 40 in total", 60) == [1]  # too wide a range: named start only
    assert named_pages("What page has a snowflake?", 60) == []


def test_labelled_pages_follow_the_reference_graph() -> None:
    from llama_index_docmemo.levers.references import labelled_pages, mentions_labels

    graph = build_reference_graph({2: "Figure 1: overview", 14: "Figure 9. Results", 20: "text"})
    assert mentions_labels("In Figure 9, which method is best?")
    assert not mentions_labels("Which method is best?")
    assert labelled_pages("Compare Figure 1 and Figure 9", graph) == [2, 14]
    assert labelled_pages("In Table 4, what?", graph) == []
    assert graph.defining("figure", "9") == [14]


# ---------------------------------------------------------------- primary financial statements


def test_metric_questions_search_the_statements_their_inputs_come_from() -> None:
    from llama_index_docmemo.levers.statements import BALANCE, CASH_FLOW, INCOME, statement_queries

    assert statement_queries("What is the FY2017 return on equity?") == [INCOME, BALANCE]
    assert statement_queries("What was capital expenditure in 2019?") == [CASH_FLOW]
    assert statement_queries("Days payable outstanding (DPO) for FY2017?") == [INCOME, BALANCE]
    assert statement_queries("How many cartoons are in the slides?") == []


def test_a_question_naming_a_statement_or_pp_and_e_searches_that_statement() -> None:
    from llama_index_docmemo.levers.statements import BALANCE, INCOME, statement_queries

    assert statement_queries("Did Pfizer grow its PPNE between FY20 and FY21?") == [BALANCE]
    assert statement_queries("What is 3M's net PP&E, as shown in the balance sheet?") == [BALANCE]
    assert statement_queries("Property, plant and equipment at year end?") == [BALANCE]
    assert statement_queries("Using the statement of income: what changed?") == [INCOME]
    assert statement_queries("Per the consolidated income statement, what changed?") == [INCOME]


def test_title_questions_name_the_first_page() -> None:
    from llama_index_docmemo.levers.references import named_pages

    assert named_pages("What is the title of the slide?", 20) == [1]
    assert named_pages("What is the title of this presentation?", 20) == [1]
    assert named_pages("What is the title of Figure 2?", 20) == []
