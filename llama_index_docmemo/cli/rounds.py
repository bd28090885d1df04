"""A query's rounds as the terminal shows them (``docmemo ask`` and ``docmemo demo``): the pages
read and judged useful, each with its document, and over several documents their beliefs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_index_docmemo.trace import PageScore, RoundTrace


def pages_by_document(pages: Sequence[PageScore]) -> str:
    """``report.pdf p.10, p.8; notes.pdf p.3``: the pages in order, each document named once
    where its run of pages starts."""
    parts: list[str] = []
    current = None
    for page in pages:
        if page.doc_id != current:
            parts.append(f"{'; ' if parts else ''}{page.doc_id} p.{page.page}")
            current = page.doc_id
        else:
            parts.append(f", p.{page.page}")
    return "".join(parts)


DOCUMENTS_SHOWN = 3


def document_beliefs(rnd: RoundTrace) -> str:
    """``a.pdf 0.86 (5 pages), b.pdf 0.41``: the best-believed documents after the round
    (posterior mean) with the pages the round gave them; "" for a one-document scope."""
    shown = rnd.documents[:DOCUMENTS_SHOWN]
    parts = [f"{d.doc_id} {d.mean:.2f}" + (f" ({d.pages} pages)" if d.pages else "") for d in shown]
    more = len(rnd.documents) - len(shown)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def round_line(rnd: RoundTrace) -> str:
    """One round: its query, the pages read, the reader's verdict, the pages it judged useful
    and, over several documents, the document beliefs."""
    verdict = rnd.feedback.status if rnd.feedback else "no feedback"
    useful = pages_by_document(rnd.feedback.useful) if rnd.feedback else ""
    documents = document_beliefs(rnd)
    return (
        f"  round {rnd.round}: query={rnd.query!r} read [{pages_by_document(rnd.selected)}] "
        f"-> {verdict}; useful [{useful}]" + (f"; documents [{documents}]" if documents else "")
    )
