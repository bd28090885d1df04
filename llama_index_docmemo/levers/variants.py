"""Evaluation variants of the levers: each lever alone on the pre-lever loop, and the combination.

Every variant is a full set of lever switches (the others off), so a row means the same thing
whatever ``DocMemoConfig``'s defaults are: ``no_levers`` is the loop before issue 14, and
``lever_<name>`` is that loop with one lever on, ``levers`` the combination chosen on the
tuning half (the defaults since). ``docmemo`` itself runs the defaults.
The values are the ones measured on the tuning half (README, "Levers").
"""

from __future__ import annotations

from typing import Any

LEVERS_OFF: dict[str, Any] = {
    "feedback_search": "off",
    "reference_weight": 0.0,
    "continuation_weight": None,
    "question_reference_weight": 0.0,
    "later_candidates": None,
    "subqueries": False,
    "schema_field_weight": 0.0,
    "statement_weight": 0.0,
    "pages_schedule": None,
    "prior_calibration": None,
    "sampling": "greedy",
    "prior_strength": 0.0,
}

LEVER_SETTINGS: dict[str, dict[str, Any]] = {
    "feedback": {"feedback_search": "recommend", "feedback_weight": 0.5},
    "feedback_multi": {
        "feedback_search": "recommend",
        "feedback_vector": "multi",
        "feedback_weight": 0.5,
    },
    "discovery": {"feedback_search": "discover", "feedback_weight": 0.5},
    "references": {"reference_weight": 2.0},
    "question_refs": {"question_reference_weight": 3.0},
    "subqueries": {"subqueries": True, "subquery_weight": 0.7},
    "schema_field": {"schema_field_weight": 0.5},
    "statements": {"statement_weight": 0.7},
    "wide_pool": {"later_candidates": 60},
    # Thompson sampling with a prior calibrated on the tuning half's first-round rankings
    # (benchmarks/fit_prior_calibration.py): p = sigmoid(b0 + b1 c + b2 log(1 + rank)).
    "priors": {
        "sampling": "thompson",
        "prior_strength": 30.0,
        "prior_calibration": [-3.548, 3.167, -0.200],
    },
    "budget_shape": {"pages_schedule": [3, 6, 6]},
}

COMBINED: dict[str, Any] = {
    "question_reference_weight": 3.0,
    "reference_weight": 2.0,
    "statement_weight": 0.7,
    "subqueries": True,
}

LEVER_VARIANTS: dict[str, dict[str, Any]] = {
    "no_levers": dict(LEVERS_OFF),
    **{f"lever_{name}": {**LEVERS_OFF, **settings} for name, settings in LEVER_SETTINGS.items()},
    "levers": {**LEVERS_OFF, **COMBINED},
}
