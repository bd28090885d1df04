"""The statement lever (pure): a financial metric question's primary statements as extra
searches, and their rankings fused with the question's own.

A question about a financial metric ("return on equity", "days payable outstanding", "debt to
EBITDA") rarely shares words with the page holding its inputs: the consolidated income
statement, balance sheet or cash-flow statement, whose headings are standard. Each metric term
maps to the statements its inputs come from; the statements' standard headings become extra
searches, fused with the question's ranking from round 2 on.

Fusion: each ranking is a mapping page -> score (higher is better); scores are first brought to
[0, 1] (best = 1) so rankings from different searches are comparable, then combined per page as a
weighted maximum (a page strongly found by any one search stays strong) or a weighted sum (pages
found by several searches rise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar

from llama_index_docmemo.memory.belief import normalise_scores

INCOME = "consolidated statements of operations income statement net sales revenue operating income net income"
BALANCE = "consolidated balance sheets total assets total liabilities stockholders equity"
CASH_FLOW = "consolidated statements of cash flows operating activities investing activities"

_TERMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        r"revenue|net sales|\bsales\b|net income|net earnings|operating (?:income|profit)|"
        r"gross (?:profit|margin)|\bmargin\b|ebitda|\bebit\b|earnings per share|\beps\b|"
        r"tax rate|income tax|interest expense|cost of (?:sales|revenue|goods)|\bcogs\b|"
        r"operating expenses|\bsg&a\b|return on (?:assets?|equity|invested capital)|\broa\b|"
        r"\broe\b|\broic\b|days (?:payable|sales|inventory)|\bdpo\b|\bdso\b|\bdio\b|"
        r"inventory turnover|asset turnover|interest coverage|payout ratio|"
        r"income statements?|statements? of (?:income|operations|earnings)|\bp&l\b|"
        r"profit and loss",
        (INCOME,),
    ),
    (
        r"total assets|\bassets?\b|liabilit|\bequity\b|\bdebt\b|inventor|receivable|payable|"
        r"working capital|current ratio|quick ratio|cash balance|cash and cash equivalents|"
        r"book value|leverage|return on (?:assets?|equity|invested capital)|\broa\b|\broe\b|"
        r"\broic\b|days (?:payable|sales|inventory)|\bdpo\b|\bdso\b|\bdio\b|turnover|"
        r"balance sheets?|statements? of financial position|\bpp&?n?e\b|"
        r"property,? plant,? and equipment|fixed assets",
        (BALANCE,),
    ),
    (
        r"cash flow|operating activities|capital expenditure|\bcapex\b|free cash|dividends paid|"
        r"depreciation|amortization|share repurchase|buyback",
        (CASH_FLOW,),
    ),
)
_COMPILED = tuple((re.compile(pattern, re.IGNORECASE), queries) for pattern, queries in _TERMS)


def statement_queries(question: str) -> list[str]:
    """Searches for the primary statements the question's metric terms need ([] when none)."""
    out: list[str] = []
    for pattern, queries in _COMPILED:
        if pattern.search(question):
            out.extend(q for q in queries if q not in out)
    return out


K = TypeVar("K")
FusionRule = Literal["max", "sum"]


def unit_scores(scores: Mapping[K, float]) -> dict[K, float]:
    """A ranking's scores in [0, 1], best -> 1, by the loop's own rule for retrieval scores
    (:func:`~llama_index_docmemo.memory.belief.normalise_scores`), so both scales agree."""
    return dict(zip(scores, normalise_scores(list(scores.values())).tolist(), strict=True))


def fuse_rankings(
    base: Mapping[K, float],
    others: Sequence[tuple[Mapping[K, float], float]],
    rule: FusionRule = "max",
) -> dict[K, float]:
    """Fuse ``base`` (weight 1) with ``(ranking, weight)`` pairs; returns page -> fused score.

    With ``rule="max"`` a page's score is max(base, w_i * other_i); with ``"sum"`` it is
    base + sum(w_i * other_i). Pages missing from a ranking score 0 there. Order of the result:
    fused score descending, ties in the order pages first appear (``base`` first), so the
    fusion is deterministic.
    """
    fused: dict[K, float] = dict(unit_scores(base))
    for ranking, weight in others:
        if weight < 0:
            raise ValueError(f"fusion weight must be non-negative, got {weight}")
        for key, score in unit_scores(ranking).items():
            value = weight * score
            if rule == "max":
                fused[key] = max(fused.get(key, 0.0), value)
            else:
                fused[key] = fused.get(key, 0.0) + value
    order = {key: i for i, key in enumerate(fused)}
    return dict(sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]])))
