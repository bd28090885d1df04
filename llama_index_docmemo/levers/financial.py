"""Primary financial statements for metric questions (pure): where a ratio's inputs are printed.

A question about a financial metric ("return on equity", "days payable outstanding", "debt to
EBITDA") rarely shares words with the page holding its inputs: the consolidated income
statement, balance sheet or cash-flow statement, whose headings are standard. Each metric term
maps to the statements its inputs come from; the statements' standard headings become extra
searches, fused with the question's ranking from round 2 on.
"""

from __future__ import annotations

import re

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
