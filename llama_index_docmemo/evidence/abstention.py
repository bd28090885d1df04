"""When an answer's evidence is too weak to stand by: the abstention rule, pure.

An answer (or the best guess of a loop that ran out of rounds) is turned into "not found" plus the
best candidate pages when ``rule`` says its evidence is weak:

- ``"unverified"``: no citation of the answer is verified (no figure, name or quote of it is on
  a page read);
- ``"low_belief"``: the pages it cites (the verified citations' pages, else the evidence pages)
  have a posterior mean belief under ``min_belief``, the best of them included;
- ``"unverified_or_low_belief"``: either; ``"off"``: never.

docs/evaluation.md ("Abstention") measures the trade-off (false answers avoided against true
answers lost) on the unanswerable questions of the dev data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from llama_index_docmemo.evidence.citations import Citation
from llama_index_docmemo.types import PageRef

AbstainRule = Literal["off", "unverified", "low_belief", "unverified_or_low_belief"]
NOT_FOUND = "Not found: the evidence for an answer is too weak ({reason})."


def cited_pages(citations: Sequence[Citation], evidence: Sequence[PageRef]) -> list[PageRef]:
    """The pages of the verified citations, in order; the evidence pages when there are none."""
    cited = list(dict.fromkeys(c.ref for c in citations if c.verified and c.ref is not None))
    return cited or list(evidence)


def abstention_reason(
    rule: AbstainRule,
    citations: Sequence[Citation],
    evidence: Sequence[PageRef],
    beliefs: Mapping[PageRef, float],
    min_belief: float,
) -> str | None:
    """Why ``rule`` turns the answer into "not found", or None when the answer stands."""
    if rule == "off":
        return None
    if rule in ("unverified", "unverified_or_low_belief") and not any(
        c.verified for c in citations
    ):
        return "no figure, name or quote of the answer is on a page read"
    if rule in ("low_belief", "unverified_or_low_belief"):
        best = max((beliefs.get(r, 0.0) for r in cited_pages(citations, evidence)), default=0.0)
        if best < min_belief:
            return f"the best cited page's belief is {best:.2f}, under {min_belief:.2f}"
    return None


def not_found_text(reason: str, candidates: Sequence[tuple[PageRef, float]]) -> str:
    """The answer of an abstention: why, and the best candidate pages with their beliefs."""
    text = NOT_FOUND.format(reason=reason)
    if candidates:
        listed = ", ".join(f"{r.doc_id} p. {r.page} ({b:.2f})" for r, b in candidates)
        text += f" Best candidate pages: {listed}."
    return text
