"""One immutable configuration of the DocMemo loop, in six groups: loop, selection, levers,
documents, budget, answer.

Defaults are the paper's where measurement agreed with it, and measured otherwise
(docs/evaluation.md): greedy posterior means instead of Thompson sampling, stronger propagation
and a higher belief weight, and the levers that won on the tuning half. :meth:`DocMemoConfig.paper`
gives the paper's settings exactly.

Every setting has one name and one home (``config.loop.rounds``, ``config.budget.max_llm_calls``).
For brevity the constructor and :meth:`DocMemoConfig.updated` also take the settings' names
flat (``DocMemoConfig(rounds=2, max_llm_calls=6)``): each name belongs to exactly one group.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llama_index_docmemo.evidence.citations import AbstainRule
from llama_index_docmemo.llms.image_policy import DEFAULT_MAX_IMAGE_BYTES


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LoopSettings(_Settings):
    """The rounds and what each one uses (the ablation switches of the paper's Table 3).

    Args:
        rounds: maximum retrieve -> read -> update rounds (T).
        pages_per_round: pages read per round (k).
        pages_schedule: pages read in round 1, 2, ... (the last value repeats); empty:
            ``pages_per_round`` every round. Smaller later rounds let a stop come sooner
            after the evidence is found.
        answer_needs_evidence: an "answered" ends the reading only once the reader has labelled
            some page useful (an answer from no evidence is not trusted before the last round).
        give_up_after_pages: end the reading (stop "no_evidence") once this many pages were read
            and none was labelled useful; None reads on to the last round.
        static: one round of plain top-k (the baseline).
        use_schema / use_belief / use_episodic: the three memories.
        bayesian_update: apply the reader's labels to the beliefs.
        adaptive_granularity: show crops of tables and figures on the pages read.
        max_table_crops: table crops per query.
        reread_useful: pages judged useful may be read again.
        min_rounds_before_unanswerable: "unanswerable" is accepted only from this round on
            (or once every page in scope was read): "not found yet" is not "does not exist".
        max_label_changes_per_round: labels of one reply that move beliefs (feedback is untrusted).
    """

    rounds: int = Field(3, ge=1, le=10)
    pages_per_round: int = Field(5, ge=1, le=50)
    pages_schedule: tuple[int, ...] = ()
    answer_needs_evidence: bool = False
    give_up_after_pages: int | None = Field(None, ge=1)
    static: bool = False
    use_schema: bool = True
    use_belief: bool = True
    use_episodic: bool = True
    bayesian_update: bool = True
    adaptive_granularity: bool = True
    max_table_crops: int = Field(5, ge=0)
    reread_useful: bool = False
    min_rounds_before_unanswerable: int = Field(2, ge=1)
    max_label_changes_per_round: int = Field(20, ge=1)

    @field_validator("pages_schedule")
    @classmethod
    def _check_pages_schedule(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 1 <= pages <= 50 for pages in value):
            raise ValueError(f"pages_schedule values must be in [1, 50], got {list(value)}")
        return value

    @property
    def effective_rounds(self) -> int:
        return 1 if self.static else self.rounds

    def pages_at(self, round_: int) -> int:
        """Pages read in a 1-based round: the schedule's (its last value repeats), else k."""
        schedule = self.pages_schedule
        if not schedule:
            return self.pages_per_round
        return schedule[min(round_ - 1, len(schedule) - 1)]

    def round_pages(self) -> list[int]:
        """Pages read in each round when no stop comes first (its sum is the page budget)."""
        return [self.pages_at(r) for r in range(1, self.effective_rounds + 1)]


class SelectionSettings(_Settings):
    """How a round's pages are chosen: candidates, belief weight, propagation.

    Args:
        candidates: candidate pages fetched from the store per round (N).
        prefetch: first-stage candidates before the MaxSim rerank; None (the default) sizes
            them to the pages in the query's scope: 200 up to about 36,000 pages, 300 at
            100,000, 470 at 300,000 (``store.operations.prefetch_for``).
        lambda_schedule: weight of the belief against the retrieval score, per round (the last
            value repeats; paper: [0, 0.3, 0.6, 0.6]).
        sampling: "thompson" draws theta ~ Beta (paper); "greedy" uses the posterior mean.
        seed: seed of the query's random draws (Thompson sampling).
        propagation: spread a useful label to neighbouring pages.
        propagation_radius / propagation_gamma / propagation_weight: a useful page i adds
            weight * gamma^|j-i| to alpha_j of pages j within the radius (paper: 2, 0.5, 1).
        cross_section_weight: factor on propagation across a section boundary (schema memory;
            0 stops it at the boundary, 1 ignores sections).
        relevance_feedback: terms of the useful pages added to later rounds' queries (0: off).
        llm_rerank: with an LLM, let it reorder the top candidates by their schema summaries.
    """

    candidates: int = Field(30, ge=1, le=1000)
    prefetch: int | None = Field(None, ge=1, le=10000)
    lambda_schedule: tuple[float, ...] = (0.0, 0.8, 0.8)
    sampling: Literal["thompson", "greedy"] = "greedy"
    seed: int | None = 0
    propagation: bool = True
    propagation_radius: int = Field(2, ge=0)
    propagation_gamma: float = Field(0.5, ge=0.0, le=1.0)
    propagation_weight: float = Field(3.0, ge=0.0)
    cross_section_weight: float = Field(0.5, ge=0.0, le=1.0)
    relevance_feedback: int = Field(0, ge=0, le=64)
    llm_rerank: bool = False

    @model_validator(mode="after")
    def _check_schedule(self) -> SelectionSettings:
        if not self.lambda_schedule or any(not 0.0 <= v <= 1.0 for v in self.lambda_schedule):
            raise ValueError("lambda_schedule must be a non-empty list of values in [0, 1]")
        return self

    def lambda_at(self, round_: int) -> float:
        """lambda for a 1-based round; the schedule's last value repeats."""
        schedule = self.lambda_schedule
        return schedule[min(round_ - 1, len(schedule) - 1)]


class LeverSettings(_Settings):
    """Retrieval levers that use the document's structure and the question's own references
    (docs/evaluation.md, "Levers"): on by default, the combination that won on the tuning half of
    MMLongBench-Doc. Only ``statement_first_round=1`` changes round 1 (and with it the
    first-round ranking every baseline of the evaluation reads).

    Args:
        question_reference_weight: alpha given before round 1 to the pages the question names
            ("page 25", "the cover", "slide 3", "Figure 9" via the reference graph). 0: off.
        reference_weight / continuation_weight: alpha added to pages a useful page references
            ("see Table 3", "Note 12") / continues on (0: off; None: same as reference_weight).
        statement_weight: from round 2, for a question naming a financial metric (ROE, DPO,
            margin, cash flow...), also search the headings of the primary statements its
            inputs come from and fuse with this weight (0: off).
        statement_first_round: the first round whose candidates fuse the statement searches.
        fusion_rule: "max" or "sum" of the weighted unit-scaled rankings.
    """

    question_reference_weight: float = Field(3.0, ge=0.0)
    reference_weight: float = Field(2.0, ge=0.0)
    continuation_weight: float | None = Field(None, ge=0.0)
    statement_weight: float = Field(0.7, ge=0.0)
    statement_first_round: int = Field(2, ge=1)
    fusion_rule: Literal["max", "sum"] = "max"

    @property
    def searching(self) -> bool:
        """Whether a lever adds searches to rounds 2 and later."""
        return self.statement_weight > 0


class DocumentSettings(_Settings):
    """Beliefs over documents, for a scope of more than one document (DESIGN §8): a question
    asked of a whole collection first has to find its document. With one document in scope
    none of this runs and the loop is the per-document one.

    Args:
        document_beliefs: keep a Beta belief per candidate document and allot each round's
            pages across documents by it (off: pages are chosen over the whole scope at once).
        document_search_pages: pages of the question's search over the whole scope that the
            document stage scores documents by (their best page, and their cards).
        card_weight: weight of the card match (file name, title, metadata, first page, outline
            against the question's words) against the best page score.
        document_prior_strength: pseudo-counts a document's stage score is worth in its prior.
        document_irrelevant_weight: b_d added per page of d labelled irrelevant (a useful
            page adds 1 to a_d).
        document_miss_weight: b_d added for a round that read pages of d and found none
            useful, times 1 - the question's card match of d: a document chosen by its pages
            alone is left after a fruitless round, a filing the question names is searched on.
        documents_per_round: most documents one round reads from (two for a question that
            compares two filings).
        document_share: another document shares a round's pages once its belief draw is at
            least this fraction of the best one's.
        card_lead: the lead the best card's match must have over the next one's
            (:func:`~llama_index_docmemo.levers.document_stage.card_lead`) for the beliefs to
            choose documents; a question that names no document apart is read over the whole
            scope, as with ``document_beliefs`` off.
    """

    document_beliefs: bool = True
    document_search_pages: int = Field(100, ge=1, le=1000)
    card_weight: float = Field(0.7, ge=0.0, le=1.0)
    document_prior_strength: float = Field(4.0, ge=0.0)
    document_irrelevant_weight: float = Field(0.03, ge=0.0)
    document_miss_weight: float = Field(1.0, ge=0.0)
    documents_per_round: int = Field(2, ge=1, le=10)
    document_share: float = Field(0.9, ge=0.0, le=1.0)
    card_lead: float = Field(0.1, ge=0.0, le=1.0)


class BudgetSettings(_Settings):
    """What one query may cost, and the questions it accepts.

    Args:
        max_llm_calls / max_pages: per-query cost budget.
        max_seconds: per-query wall-clock budget, checked between steps and capping the
            reader's LLM requests (stop reason "deadline").
        max_question_chars / question_overflow: questions longer than this are refused
            ("error") or cut ("truncate"); an empty question is always refused.
        max_image_tokens: most tokens one page or crop image may cost the reader and reranker,
            by the model family's formula (``llms/image_policy.py``); None sends each image at
            the resolution the model uses, and never more.
        max_image_bytes: most base64 bytes the images of one reader or reranker request may
            take (``llms/image_policy.py``: lower JPEG quality, then fewer pixels, the largest
            image first; past the floor the lowest-priority images go as text). The default
            keeps a request within 1 MB, the body many proxies refuse beyond; None: no budget.
    """

    max_llm_calls: int | None = Field(None, ge=1)
    max_pages: int | None = Field(None, ge=1)
    max_seconds: float | None = Field(None, gt=0)
    max_question_chars: int = Field(4000, ge=1)
    question_overflow: Literal["error", "truncate"] = "error"
    max_image_tokens: int | None = Field(None, ge=64)
    max_image_bytes: int | None = Field(DEFAULT_MAX_IMAGE_BYTES, ge=1024)


class AnswerSettings(_Settings):
    """What the answer carries: citation markers, and when weak evidence makes it "not found"
    (:mod:`llama_index_docmemo.evidence.citations`; measured in docs/evaluation.md, "Abstention").

    Args:
        citation_markers: write ``[n]`` after each cited figure or name of the answer, n the
            position of its page in ``source_nodes`` (as ``CitationQueryEngine`` does). Off by
            default: the answer text stays what the reader wrote (exact-match checks, the
            streamed answer's prompt and ``docmemo compare`` read it), and the citations are in
            ``metadata["docmemo"]["citations"]`` either way.
        abstain: the rule that turns an answer into "not found" plus the best candidate pages:
            "off", "unverified" (no verified citation), "low_belief" (cited pages' belief under
            ``abstain_min_belief``), "unverified_or_low_belief".
        abstain_min_belief: the posterior-mean belief a cited page needs (``low_belief``).
        ocr_boxes: box citations on pages read by OCR from their OCR word boxes. Each such page
            is OCR'd again (at most three an answer, after the loop, outside ``max_seconds``):
            measured with the offline reader on MMLongBench-Doc's tuning half, 18-25 s without
            and 188-210 s with (docs/python.md), so off by default; ``docmemo ask --html`` turns
            it on. Off: those citations keep a crop's box or none.
    """

    citation_markers: bool = False
    ocr_boxes: bool = False
    abstain: AbstainRule = "off"
    abstain_min_belief: float = Field(0.6, ge=0.0, le=1.0)


_GROUPS: dict[str, type[_Settings]] = {
    "loop": LoopSettings,
    "selection": SelectionSettings,
    "levers": LeverSettings,
    "documents": DocumentSettings,
    "budget": BudgetSettings,
    "answer": AnswerSettings,
}
_GROUP_OF: dict[str, str] = {
    name: group for group, model in _GROUPS.items() for name in model.model_fields
}


def _grouped(values: dict[str, Any]) -> dict[str, Any]:
    """Flat setting names routed into their group (groups given whole are kept)."""
    out: dict[str, Any] = {}
    flat: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if key in _GROUPS:
            out[key] = value
        elif key in _GROUP_OF:
            flat.setdefault(_GROUP_OF[key], {})[key] = value
        else:
            known = ", ".join(sorted(_GROUP_OF))
            raise ValueError(f"DocMemoConfig has no setting {key!r}; settings: {known}")
    for group, settings in flat.items():
        base = out.get(group, {})
        if isinstance(base, BaseModel):
            base = base.model_dump()
        out[group] = {**base, **settings}
    return out


class DocMemoConfig(_Settings):
    """Parameters of the DocMemo loop (DESIGN §3) and the switches for each ablation (§1),
    in six groups; immutable (:meth:`updated` returns a changed copy)."""

    loop: LoopSettings = Field(default_factory=LoopSettings)
    selection: SelectionSettings = Field(default_factory=SelectionSettings)
    levers: LeverSettings = Field(default_factory=LeverSettings)
    documents: DocumentSettings = Field(default_factory=DocumentSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)

    @model_validator(mode="before")
    @classmethod
    def _route_flat_names(cls, data: Any) -> Any:
        return _grouped(data) if isinstance(data, dict) else data

    def updated(self, **changes: Any) -> DocMemoConfig:
        """A copy with ``changes`` (flat setting names or whole groups) applied."""
        current = {group: getattr(self, group).model_dump() for group in _GROUPS}
        merged = _grouped(changes)
        for group, value in merged.items():
            if isinstance(value, BaseModel):
                value = value.model_dump()
            current[group] = {**current[group], **value}
        return DocMemoConfig(**current)

    @classmethod
    def paper(cls, **overrides: Any) -> DocMemoConfig:
        """The settings exactly as the paper states them (Thompson sampling, weak propagation,
        no levers)."""
        settings: dict[str, Any] = {
            "lambda_schedule": (0.0, 0.3, 0.6, 0.6),
            "sampling": "thompson",
            "propagation_weight": 1.0,
            "cross_section_weight": 1.0,
            "relevance_feedback": 0,
            "question_reference_weight": 0.0,
            "reference_weight": 0.0,
            "statement_weight": 0.0,
        }
        return cls().updated(**{**settings, **overrides})

    @staticmethod
    def setting_names() -> dict[str, str]:
        """Every flat setting name and the group it belongs to."""
        return dict(_GROUP_OF)
