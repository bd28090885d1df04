"""Feedback is untrusted input (it may echo instructions hidden in document text): keep only
labels about pages that were shown, bounded in number, and notes about pages actually read."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from llama_index_docmemo.reasoning.base import Feedback
from llama_index_docmemo.types import PageRef


def sanitize_feedback(
    feedback: Feedback,
    shown: Sequence[PageRef],
    read: Collection[PageRef],
    max_labels: int,
) -> tuple[Feedback, int]:
    """A copy of ``feedback`` that names only shown pages (labels) and read pages (notes).

    A page labelled both useful and irrelevant keeps neither. At most ``max_labels`` labels
    survive per kind, which bounds how far one round can move the beliefs. Returns the copy
    and the number of labels and notes dropped.
    """
    shown_set = set(shown)
    useful = list(dict.fromkeys(r for r in feedback.useful_pages if r in shown_set))
    irrelevant = list(dict.fromkeys(r for r in feedback.irrelevant_pages if r in shown_set))
    both = set(useful) & set(irrelevant)
    useful = [r for r in useful if r not in both][:max_labels]
    irrelevant = [r for r in irrelevant if r not in both][:max_labels]
    readable = shown_set | set(read)
    notes = [n for n in feedback.notes if n.page in readable]
    dropped = (
        len(feedback.useful_pages)
        + len(feedback.irrelevant_pages)
        + len(feedback.notes)
        - len(useful)
        - len(irrelevant)
        - len(notes)
    )
    clean = feedback.model_copy(
        update={"useful_pages": useful, "irrelevant_pages": irrelevant, "notes": notes}
    )
    return clean, dropped
