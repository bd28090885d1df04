"""Evaluation variants of the levers: each lever alone on the pre-lever loop, and the combination.

Every variant is a full set of lever switches (the others off), so a row means the same thing
whatever ``DocMemoConfig``'s defaults are: ``no_levers`` is the loop before issue 14, and
``lever_<name>`` is that loop with one lever on, ``levers`` the combination chosen on the
tuning half (the defaults since). ``docmemo`` itself runs the defaults.
The values are the ones measured on the tuning half (docs/evaluation.md, "Levers"); the levers that did not
move all-hit there (feedback search, the wider pool, the budget shape, the schema field, the
calibrated priors, the sub-queries) were removed with their switches and have no variant.
"""

from __future__ import annotations

from typing import Any

LEVERS_OFF: dict[str, Any] = {
    "reference_weight": 0.0,
    "continuation_weight": None,
    "question_reference_weight": 0.0,
    "statement_weight": 0.0,
    "sampling": "greedy",
}

LEVER_SETTINGS: dict[str, dict[str, Any]] = {
    "references": {"reference_weight": 2.0},
    "question_refs": {"question_reference_weight": 3.0},
    "statements": {"statement_weight": 0.7},
}
"""The levers kept. Feedback search in vector space (recommend / discovery), the wider pool,
the budget shape, the schema-field BM25, calibrated priors and sub-queries lost their measurement
on the tuning half and were removed with their code (docs/evaluation.md, "Levers")."""

COMBINED: dict[str, Any] = {
    "question_reference_weight": 3.0,
    "reference_weight": 2.0,
    "statement_weight": 0.7,
}

LEVER_VARIANTS: dict[str, dict[str, Any]] = {
    "no_levers": dict(LEVERS_OFF),
    **{f"lever_{name}": {**LEVERS_OFF, **settings} for name, settings in LEVER_SETTINGS.items()},
    "levers": {**LEVERS_OFF, **COMBINED},
}
