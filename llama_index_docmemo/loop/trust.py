"""When the reader's feedback ends the reading: one rule for DocMemo's loop and the ranking baselines."""

from __future__ import annotations


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
