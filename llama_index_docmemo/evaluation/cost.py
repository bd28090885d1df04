"""What a question cost at the stop: pages read, reader requests, LLM calls, estimated prompt tokens.

Pure functions over runs. A reader request is one round that showed pages (the loop asks the reader
once a round, so with a real LLM it is the reading part of the LLM calls; the simulated reader
makes no LLM call, so its runs measure 0 calls and their requests say what an LLM would have been
asked). Prompt tokens are an estimate: a fixed text part per request plus a part per page shown
(a page shown again in a later round is paid again), from a :class:`TokenEstimate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_docmemo.evaluation.datasets import QAItem
from llama_index_docmemo.evaluation.metrics import QuestionRun
from llama_index_docmemo.types import PageRef


@dataclass(frozen=True)
class TokenEstimate:
    """Prompt tokens of a reader request: ``per_request`` + ``per_page`` for each page shown.

    Args:
        per_page: one page's image and extracted text in the prompt.
        per_request: the instructions, question, outline and notes of one request.
        source: how the two numbers were obtained (printed in the report).
    """

    per_page: int
    per_request: int
    source: str

    def __post_init__(self) -> None:
        if self.per_page < 0 or self.per_request < 0:
            raise ValueError(
                f"token estimates must be >= 0, got {self.per_page}, {self.per_request}"
            )


@dataclass(frozen=True)
class QuestionCost:
    """One run's cost up to a reading budget (or at its stop)."""

    pages_read: int  # distinct pages
    pages_shown: int  # pages in the requests (a re-read page counts again)
    requests: int
    llm_calls: int
    tokens: int


def rounds_within(reads: Sequence[Sequence[PageRef]], n_pages: int) -> list[list[PageRef]]:
    """The rounds of ``reads`` cut where the ``n_pages``-th distinct page was read.

    The round reading it keeps only its pages up to that one: a budget of n pages counts the
    requests and pages an engine needed to read its first n pages.
    """
    seen: set[PageRef] = set()
    out: list[list[PageRef]] = []
    for round_ in reads:
        if len(seen) >= n_pages:
            break
        kept: list[PageRef] = []
        for ref in round_:
            if ref not in seen and len(seen) >= n_pages:
                break
            seen.add(ref)
            kept.append(ref)
        if kept:
            out.append(kept)
    return out


def question_cost(
    run: QuestionRun, estimate: TokenEstimate, n_pages: int | None = None
) -> QuestionCost:
    """``run``'s cost at its stop, or up to its first ``n_pages`` distinct pages.

    Measured LLM calls cannot be split between rounds: they are the whole run's.
    """
    reads = (
        [list(r) for r in run.reads if r] if n_pages is None else rounds_within(run.reads, n_pages)
    )
    shown = sum(len(r) for r in reads)
    return QuestionCost(
        pages_read=len({ref for r in reads for ref in r}),
        pages_shown=shown,
        requests=len(reads),
        llm_calls=run.llm_calls,
        tokens=len(reads) * estimate.per_request + shown * estimate.per_page,
    )


def mean_cost(
    runs: Sequence[QuestionRun],
    items: Mapping[str, QAItem],
    estimate: TokenEstimate,
    n_pages: int | None = None,
) -> dict[str, float]:
    """Means over the page-scored questions of ``runs``: pages read, requests, calls, tokens."""
    costs = [
        question_cost(run, estimate, n_pages)
        for run in runs
        if run.qid in items and items[run.qid].scored_on_pages
    ]
    fields = ("pages_read", "pages_shown", "requests", "llm_calls", "tokens")
    if not costs:
        return dict.fromkeys(fields, 0.0)
    return {f: float(np.mean([getattr(c, f) for c in costs])) for f in fields}


RENDERED_PAGE = (1159, 1500)
"""A letter-size page (612 x 792 points) as the reader renders it, 1,500 px on its long side."""
PAGE_TEXT_TOKENS = 414
"""One page's extracted text in a 5-page request (mean over 40 tuning questions of
MMLongBench-Doc, ``benchmarks/request_tokens.py``; filings carry more text)."""
REQUEST_TOKENS = 607
"""System prompt, question, document outline and reply form of one request (same measurement)."""
DEFAULT_COST_MODEL = "gpt-4o"


def token_estimate(model: str = DEFAULT_COST_MODEL) -> TokenEstimate:
    """The estimate for ``model``: its family's image tokens for :data:`RENDERED_PAGE` sent at
    the size worth sending (``llms.image_policy``), plus the measured text parts."""
    from llama_index_docmemo.llms.image_policy import fit_size, image_tokens, model_family

    family = model_family(model)
    image = image_tokens(family, *fit_size(family, *RENDERED_PAGE))
    return TokenEstimate(
        per_page=image + PAGE_TEXT_TOKENS,
        per_request=REQUEST_TOKENS,
        source=f"{model} ({family}): {image} image + {PAGE_TEXT_TOKENS} text tokens a letter page",
    )
