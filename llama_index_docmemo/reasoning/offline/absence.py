"""The strong-evidence rule for "unanswerable": the question's anchors are absent from what was read.

A question is called unanswerable only when all of these hold:

1. the document was explored: this is the final round, or at least half of the pages in scope
   have been read;
2. nothing was found: no page of this round was labelled useful and no earlier round left notes;
3. the question names distinctive anchors (years and names; a plain number in a question more
   often points at a figure or a page than at content), and at least ``absent_share`` of their
   weight occurs on none of the pages shown in this round (crops included) nor in any earlier
   note;
4. every page shown this round has text to read (at least ``MIN_PAGE_WORDS`` content words): on a
   slide, a scan or a chart the name may be in the picture, so its absence from the text says
   little. The final round's pages are retrieved with a query led by the still-missing terms, so
   an anchor that the lexical search cannot place on any of them is strong evidence that the
   document does not hold it.

Otherwise the reader says it found no answer and shows passages (``passages.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index_docmemo.reasoning.base import ReasoningInput
from llama_index_docmemo.reasoning.offline.question import Question, Term

EXPLORED_SHARE = 0.5
MIN_PAGE_WORDS = 60


def explored(inp: ReasoningInput) -> bool:
    """Whether the loop is on its final round or has read at least half the pages in scope."""
    if inp.final_round:
        return True
    read = max(inp.pages_read_total, len(inp.pages))
    return inp.pages_in_scope > 0 and read / inp.pages_in_scope >= EXPLORED_SHARE


def absent_anchors(q: Question, seen: frozenset[str]) -> list[Term]:
    """The question's distinctive anchors whose key is not among ``seen``."""
    return [t for t in q.distinctive if t.key not in seen]


def strongly_unanswerable(
    q: Question,
    inp: ReasoningInput,
    seen: frozenset[str],
    found_evidence: bool,
    absent_share: float,
    page_words: Sequence[int] = (),
) -> bool:
    """The rule of this module's docstring.

    ``seen`` holds the keys of every text read this round and of the earlier notes;
    ``page_words`` the number of content words of each page shown this round.
    """
    anchors = q.distinctive
    if found_evidence or not anchors or not explored(inp):
        return False
    if any(n < MIN_PAGE_WORDS for n in page_words):
        return False
    absent = sum(t.weight for t in absent_anchors(q, seen))
    return absent > 0 and absent >= absent_share * sum(t.weight for t in anchors)
