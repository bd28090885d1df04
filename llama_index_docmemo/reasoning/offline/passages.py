"""What the reader shows when it has no confident answer: the most relevant passages, with pages."""

from __future__ import annotations

from collections.abc import Iterable

from llama_index_docmemo.reasoning.offline.labels import unit_score
from llama_index_docmemo.reasoning.offline.question import Question
from llama_index_docmemo.reasoning.offline.units import Unit
from llama_index_docmemo.types import PageRef

PASSAGES = 3
NO_ANSWER = "No answer was found in the {n} pages read."


def best_passages(q: Question, units: Iterable[Unit], limit: int = PASSAGES) -> list[Unit]:
    """The ``limit`` units that match the question best (each text once), in score order.

    Ties keep the order the units were given in (pages in reading order), so the choice is
    deterministic.
    """
    scored = sorted(
        ((unit_score(q, u), i, u) for i, u in enumerate(units)), key=lambda s: (-s[0], s[1])
    )
    out: list[Unit] = []
    seen: set[str] = set()
    for score, _, unit in scored:
        fact = unit.fact()
        if score <= 0 or fact in seen:
            continue
        seen.add(fact)
        out.append(unit)
        if len(out) >= limit:
            break
    return out


def where(page: PageRef, several_docs: bool) -> str:
    """A page's citation: "p. 12", or "report.pdf p. 12" when passages come from several documents."""
    return f"{page.doc_id} p. {page.page}" if several_docs else f"p. {page.page}"


def no_answer_text(pages_read: int | None, passages: list[tuple[PageRef, str]]) -> str:
    """The answer text of a question left without a confident answer.

    Says how many pages were read (when known) and quotes the passages that match the
    question best, so a reader can judge, instead of a guessed span.
    """
    head = (
        NO_ANSWER.format(n=pages_read) if pages_read else "No answer was found in the pages read."
    )
    if not passages:
        return head
    several = len({p.doc_id for p, _ in passages}) > 1
    quoted = "\n".join(f"- [{where(p, several)}] {' '.join(text.split())}" for p, text in passages)
    return f"{head} The most relevant passages:\n{quoted}"
