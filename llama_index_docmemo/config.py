"""One configuration model holding every parameter and ablation switch.

Defaults are the paper's where measurement agreed with it, and measured otherwise (see README,
"Evaluation"): greedy posterior means instead of Thompson sampling, stronger propagation and a
higher belief weight. :meth:`DocMemoConfig.paper` gives the paper's settings exactly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class DocMemoConfig(BaseModel):
    """Parameters of the DocMemo loop (DESIGN §3) and the switches for each ablation (§1).

    Args:
        rounds: maximum retrieve -> read -> update rounds (T).
        pages_per_round: pages read per round (k).
        candidates: candidate pages fetched from the store per round (N).
        prefetch: first-stage (pooled vector) candidates before MaxSim rerank.
        lambda_schedule: weight of the belief against the retrieval score, per round (the last
            value repeats; paper: [0, 0.3, 0.6, 0.6]).
        sampling: "thompson" draws theta ~ Beta (paper); "greedy" uses the posterior mean.
        prior_strength: s > 0 primes unseen candidates with Beta(1 + s c, 1 + s (1 - c)).
        propagation_radius / propagation_gamma / propagation_weight: a useful page i adds
            weight * gamma^|j-i| to alpha_j of pages j within the radius (paper: 2, 0.5, 1).
        cross_section_weight: factor on propagation across a section boundary (schema memory;
            0 stops it at the boundary, 1 ignores sections).
        relevance_feedback: terms of the useful pages added to later rounds' queries (0: off).
        static: one round of plain top-k (the baseline).
        llm_rerank: with an LLM, let it reorder the top candidates by their schema summaries.
        max_llm_calls / max_pages: per-query cost budget.

    Levers of issue 14 (README, "Levers"; on by default: the combination that won on the tuning
    half of MMLongBench-Doc, i.e. pages the question names, reference propagation, sub-queries
    and primary statements; the others stay off, they did not win):
        feedback_search: in rounds >= 2, search the store with the pages judged useful as
            examples ("recommend": Qdrant recommend, irrelevant pages as negatives; "discover":
            Qdrant discovery with the round's query as target) and fuse that ranking with the
            question's ("off": no such search).
        feedback_vector / feedback_strategy / feedback_weight / feedback_negatives: the stored
            vector compared ("pooled" or "multi"), Qdrant's recommend strategy, the weight of
            the feedback ranking in the fusion, whether irrelevant pages are negatives.
        reference_weight / continuation_weight: alpha added to pages a useful page references
            ("see Table 3", "Note 12") / continues on (0: off; None: same as reference_weight).
        question_reference_weight: alpha given before round 1 to the pages the question names
            ("page 25", "the cover", "slide 3", "Figure 9" via the reference graph); round 1
            still reads the plain ranking (lambda = 0). 0: off.
        later_candidates: candidates fetched per round from round 2 on (None: ``candidates``).
        subqueries / subquery_weight: in rounds >= 2, also search each part of a multi-part
            question and fuse those rankings with this weight.
        statement_weight: in rounds >= 2, for a question naming a financial metric (ROE, DPO,
            margin, cash flow...), also search the standard headings of the primary statements
            its inputs come from and fuse with this weight (0: off).
        schema_field_weight: in rounds >= 2, also rank pages by BM25 of the question on their
            section titles and summaries (schema memory) and fuse with this weight (0: off).
        fusion_rule: "max" or "sum" of the weighted unit-scaled rankings.
        pages_schedule: pages read in each round (last value repeats), replacing
            ``pages_per_round`` (e.g. [3, 6, 6]: same 15 pages, fewer before any feedback).
        prior_calibration: (b0, b1, b2) of p = sigmoid(b0 + b1 c + b2 log(1 + rank)), fitted on
            the tuning half; with ``prior_strength`` > 0 unseen candidates get
            Beta(1 + s p, 1 + s (1 - p)) instead of the raw score c.
        max_seconds: per-query wall-clock budget, checked between steps (stop reason "deadline").
        max_question_chars / question_overflow: questions longer than this are refused
            ("error") or cut ("truncate"); an empty question is always refused.
    """

    rounds: int = Field(3, ge=1, le=10)
    pages_per_round: int = Field(5, ge=1, le=50)
    candidates: int = Field(30, ge=1, le=1000)
    prefetch: int = Field(200, ge=1, le=10000)
    lambda_schedule: list[float] = Field(default_factory=lambda: [0.0, 0.8, 0.8])
    sampling: Literal["thompson", "greedy"] = "greedy"
    prior_strength: float = Field(0.0, ge=0.0)
    propagation_radius: int = Field(2, ge=0)
    propagation_gamma: float = Field(0.5, ge=0.0, le=1.0)
    propagation_weight: float = Field(3.0, ge=0.0)
    cross_section_weight: float = Field(0.5, ge=0.0, le=1.0)
    relevance_feedback: int = Field(0, ge=0, le=64)
    use_schema: bool = True
    use_belief: bool = True
    use_episodic: bool = True
    bayesian_update: bool = True
    propagation: bool = True
    adaptive_granularity: bool = True
    max_table_crops: int = Field(5, ge=0)
    static: bool = False
    llm_rerank: bool = False
    reread_useful: bool = False
    max_llm_calls: int | None = Field(None, ge=1)
    max_pages: int | None = Field(None, ge=1)
    max_seconds: float | None = Field(None, gt=0)
    max_question_chars: int = Field(4000, ge=1)
    question_overflow: Literal["error", "truncate"] = "error"
    min_rounds_before_unanswerable: int = Field(2, ge=1)
    max_label_changes_per_round: int = Field(20, ge=1)
    seed: int | None = 0
    feedback_search: Literal["off", "recommend", "discover"] = "off"
    feedback_vector: Literal["pooled", "multi"] = "pooled"
    feedback_strategy: Literal["best_score", "sum_scores"] = "best_score"
    feedback_weight: float = Field(0.5, ge=0.0)
    feedback_negatives: bool = True
    reference_weight: float = Field(2.0, ge=0.0)
    continuation_weight: float | None = Field(None, ge=0.0)
    question_reference_weight: float = Field(3.0, ge=0.0)
    later_candidates: int | None = Field(None, ge=1, le=1000)
    subqueries: bool = True
    subquery_weight: float = Field(0.7, ge=0.0)
    schema_field_weight: float = Field(0.0, ge=0.0)
    statement_weight: float = Field(0.7, ge=0.0)
    fusion_rule: Literal["max", "sum"] = "max"
    pages_schedule: list[int] | None = None
    prior_calibration: list[float] | None = None

    @model_validator(mode="after")
    def _check_schedule(self) -> DocMemoConfig:
        if not self.lambda_schedule or any(not 0.0 <= v <= 1.0 for v in self.lambda_schedule):
            raise ValueError("lambda_schedule must be a non-empty list of values in [0, 1]")
        if self.pages_schedule is not None and (
            not self.pages_schedule or any(not 1 <= v <= 50 for v in self.pages_schedule)
        ):
            raise ValueError("pages_schedule must be a non-empty list of page counts in [1, 50]")
        if self.prior_calibration is not None and len(self.prior_calibration) != 3:
            raise ValueError("prior_calibration must be three coefficients (b0, b1, b2)")
        return self

    @classmethod
    def paper(cls, **overrides: object) -> DocMemoConfig:
        """The settings exactly as the paper states them (Thompson sampling, weak propagation)."""
        settings: dict[str, object] = {
            "lambda_schedule": [0.0, 0.3, 0.6, 0.6],
            "sampling": "thompson",
            "propagation_weight": 1.0,
            "cross_section_weight": 1.0,
            "relevance_feedback": 0,
            "question_reference_weight": 0.0,
            "reference_weight": 0.0,
            "subqueries": False,
            "statement_weight": 0.0,
        }
        return cls(**{**settings, **overrides})

    def lambda_at(self, round_: int) -> float:
        """lambda for a 1-based round; the schedule's last value repeats."""
        sched = self.lambda_schedule
        return sched[min(round_ - 1, len(sched) - 1)]

    @property
    def effective_rounds(self) -> int:
        return 1 if self.static else self.rounds
