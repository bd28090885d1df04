"""Relevance-feedback query expansion."""

from __future__ import annotations

from llama_index_docmemo.expansion import expansion_terms, terms


def test_terms_drop_stopwords_and_short_words() -> None:
    assert terms("The Revenue of ACME in 2023 was up") == ["revenue", "acme"]


def test_expansion_prefers_distinctive_terms_of_useful_pages() -> None:
    background = [
        "annual report acme corporation overview",
        "annual report acme corporation segment margin retail wholesale",
        "annual report acme corporation weather",
        "annual report acme corporation plants",
    ]
    useful = [background[1]]
    got = expansion_terms("what was the margin", useful, background, limit=3)
    assert got == ["retail", "segment", "wholesale"]
    assert "annual" not in got and "margin" not in got


def test_expansion_is_empty_without_useful_pages_or_budget() -> None:
    assert expansion_terms("q", [], ["a b c"], limit=5) == []
    assert expansion_terms("q", ["segment"], ["segment"], limit=0) == []
