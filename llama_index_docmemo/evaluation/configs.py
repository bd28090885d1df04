"""Engine name -> ``DocMemoConfig``: the one place the harness builds a configuration.

``docmemo eval`` and ``docmemo compare`` run DocMemo and its ablations with the run's pages per
round (k), rounds (T), seed and ``--set`` overrides; every configuration they use comes from
:meth:`EngineConfigs.for_engine`, so a change to ``DocMemoConfig``'s shape is made here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llama_index_docmemo.config import DocMemoConfig


def flat_settings(config: DocMemoConfig) -> dict[str, Any]:
    """Every setting of ``config`` by its flat name (``rounds``, ``candidates``, ...)."""
    return {
        name: getattr(getattr(config, group), name)
        for name, group in DocMemoConfig.setting_names().items()
    }


def _paper_settings() -> dict[str, Any]:
    """The settings where the paper's differ from the defaults."""
    paper, default = flat_settings(DocMemoConfig.paper()), flat_settings(DocMemoConfig())
    return {name: value for name, value in paper.items() if default[name] != value}


# -- issue 14's levers: each alone on the pre-lever loop, and the combination ------------------
# Every variant is a full set of lever switches (the others off), so a row means the same thing
# whatever ``DocMemoConfig``'s defaults are: ``no_levers`` is the loop before issue 14,
# ``lever_<name>`` that loop with one lever on, ``levers`` the combination chosen on the tuning
# half (the defaults since; docs/evaluation.md, "Levers").

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


ABLATIONS: dict[str, dict[str, Any]] = {
    "no_schema": {"use_schema": False},
    "no_belief": {"use_belief": False},
    "no_episodic": {"use_episodic": False},
    "no_memory": {"use_schema": False, "use_belief": False, "use_episodic": False},
    "no_bayes": {"bayesian_update": False},
    "greedy": {"sampling": "greedy"},  # the default since measurement (kept for the issue's list)
    "thompson": {"sampling": "thompson"},
    "paper": _paper_settings(),
    "no_propagation": {"propagation": False},
    "no_crops": {"adaptive_granularity": False},
    "relevance_feedback": {"relevance_feedback": 16},
    # pages chosen over the whole scope at once, as before document beliefs (``--scope corpus``)
    "no_document_beliefs": {"document_beliefs": False},
    **LEVER_VARIANTS,  # issue 14's levers, one row each (above)
}
"""Each ablation's fields on top of the run's settings (the ablation wins over ``--set``)."""


def check_overrides(overrides: Mapping[str, Any]) -> None:
    """Raise ValueError naming ``--set`` keys that are not ``DocMemoConfig`` fields."""
    unknown = sorted(set(overrides) - set(DocMemoConfig.setting_names()))
    if unknown:
        raise ValueError(f"--set names unknown DocMemoConfig field(s): {', '.join(unknown)}")


@dataclass(frozen=True)
class EngineConfigs:
    """What every DocMemo engine of one run shares: k, T and the ``--set`` overrides.

    Args:
        pages_per_round: pages read per round (k).
        rounds: rounds per question (T).
        overrides: ``DocMemoConfig`` fields for every DocMemo engine (``--set KEY=VALUE``).
        fixed_budget: the run reads every engine's full budget (``--stop never``), so the
            engine's own early stop (``give_up_after_pages``) is off, as the reader's is.
    """

    pages_per_round: int = 5
    rounds: int = 3
    overrides: Mapping[str, Any] = field(default_factory=dict)
    fixed_budget: bool = False

    def __post_init__(self) -> None:
        check_overrides(self.overrides)

    @property
    def budget(self) -> int:
        """Pages an engine reads at most (T x k)."""
        return self.pages_per_round * self.rounds

    def for_engine(self, name: str = "docmemo", *, seed: int | None = 0) -> DocMemoConfig:
        """The configuration of ``docmemo`` or of an ablation under ``seed``."""
        if name != "docmemo" and name not in ABLATIONS:
            raise ValueError(
                f"unknown engine {name!r}; DocMemo engines are docmemo, {', '.join(ABLATIONS)}"
            )
        settings = {
            "pages_per_round": self.pages_per_round,
            "rounds": self.rounds,
            "seed": seed,
            **self.overrides,
            **ABLATIONS.get(name, {}),
        }
        if self.fixed_budget:
            settings["give_up_after_pages"] = None
        return DocMemoConfig(**settings)
