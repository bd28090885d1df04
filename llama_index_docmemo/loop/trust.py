"""When the reading ends: the loop's stop policy, and the rules it shares with the baselines.

Pure: the loop and the evaluation's ranking baselines (``static-paged``, ``neighbours``) each
gather a round's :class:`RoundOutcome` and ask :func:`stop_reason`, so both stop by one policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_index_docmemo.config import BudgetSettings, LoopSettings
    from llama_index_docmemo.trace import StopReason


def trusts_answer(status: str, *, useful_so_far: int, needs_evidence: bool) -> bool:
    """Whether a round's ``status`` ends the reading as "answered".

    With ``needs_evidence`` an answer counts only once some page read was labelled useful: a
    reader that says "answered" from pages it judged irrelevant is guessing, and the next round
    costs less than a wrong answer.

    Args:
        status: the reader's status after the round.
        useful_so_far: pages labelled useful in this and earlier rounds.
        needs_evidence: the ``answer_needs_evidence`` setting.
    """
    return status == "answered" and (useful_so_far > 0 or not needs_evidence)


def gives_up(*, pages_read: int, useful_so_far: int, after_pages: int | None) -> bool:
    """Whether the reading ends with nothing found: ``after_pages`` pages read, none useful.

    A document that showed the reader that many of its best-ranked pages without one worth
    keeping rarely holds the evidence further down, and every later round is paid in full
    (measured in docs/evaluation.md: it also loses the questions found late).

    Args:
        pages_read: distinct pages read so far.
        useful_so_far: pages labelled useful in this and earlier rounds.
        after_pages: the ``give_up_after_pages`` setting (None: never give up).
    """
    return after_pages is not None and useful_so_far == 0 and pages_read >= after_pages


@dataclass(frozen=True)
class RoundOutcome:
    """What the stop policy sees after a round.

    Args:
        round: the round just done (1-based).
        shown: pages selected for it (0: no candidates left).
        status: the reader's status (None: nothing was read: no reader, no budget, no time).
        useful_so_far: pages labelled useful in this and earlier rounds.
        pages_read: distinct pages read so far.
        explored: enough of the scope was read to believe "not in the documents".
        out_of_time: ``max_seconds`` has passed or cut work in flight.
        calls_left: ``max_llm_calls`` leaves room for another reading.
        llm_failed: the reader's LLM failed after pages were read.
        has_reader: a reader reads the pages (False: selection only, the retriever).
    """

    round: int
    shown: int
    status: str | None
    useful_so_far: int
    pages_read: int
    explored: bool = False
    out_of_time: bool = False
    calls_left: bool = True
    llm_failed: bool = False
    has_reader: bool = True


def stop_reason(
    outcome: RoundOutcome, loop: LoopSettings, budget: BudgetSettings
) -> StopReason | None:
    """The one stop policy: why the loop ends after this round, or None to go on. Checked in
    this order, so a round that both answers and spends the budget reports "answered"."""
    if outcome.llm_failed:
        return "llm_error"
    if not outcome.shown:
        return "no_candidates"
    if loop.static:
        return "static"
    status = outcome.status or "need_more"
    useful = outcome.useful_so_far
    if trusts_answer(status, useful_so_far=useful, needs_evidence=loop.answer_needs_evidence):
        return "answered"
    if status == "unanswerable" and outcome.explored:
        return "unanswerable"
    if outcome.out_of_time:
        return "deadline"
    if outcome.status is None or not outcome.calls_left:
        return "budget" if outcome.has_reader else "max_rounds"
    if budget.max_pages is not None and outcome.pages_read >= budget.max_pages:
        return "budget"
    if gives_up(
        pages_read=outcome.pages_read, useful_so_far=useful, after_pages=loop.give_up_after_pages
    ):
        return "no_evidence"
    if outcome.round >= loop.rounds:
        return "max_rounds"
    return None
