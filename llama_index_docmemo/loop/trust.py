"""When a reader's "answered" ends the reading: one rule for DocMemo's loop and the ranking baselines."""

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
