"""The reference levers (pure), both on what a question or a page points at in its document.

Pages the question itself names: "on page 25", "the cover", "slide 7", "Figure 9". Many questions
name where their evidence is. The question's own words are query-side structure: "page N" /
"pages N to M" / "slide N" name PDF pages, "cover" / "first page" / "last page" name the ends of
the document, and "Figure 9" / "Table 3" name the page whose caption defines that label (from the
document's reference graph). These pages get a belief prior; round 1 still reads the plain
ranking (lambda = 0), so they are read from round 2 on if nothing better shows.

Propagation along the document's structure: from the pages judged useful to the pages they
point at (a label's page, a table's continuation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from llama_index_docmemo.memory.schema import ReferenceGraph, label_mentions
from llama_index_docmemo.types import PageRef

_RANGE = re.compile(
    r"\b(?:from\s+)?(?:pages?|slides?|pp?\.)\s*(\d{1,4})\s*(?:-|\u2013|to|through|and)\s*"
    r"(?:pages?\s*|slides?\s*|pp?\.\s*)?(\d{1,4})\b",
    re.IGNORECASE,
)
_SINGLE = re.compile(r"\b(?:pages?|slides?|p\.)\s*(\d{1,4})\b", re.IGNORECASE)
_FIRST = re.compile(
    r"\b(?:front\s+)?cover\b|\b(?:first|title|front)\s+(?:page|slide)\b|"
    r"\btitle of (?:the|this) (?:document|report|paper|slides?|deck|presentation|book)\b",
    re.IGNORECASE,
)
_LAST = re.compile(r"\b(?:last|final)\s+(?:page|slide)\b|\bback\s+cover\b", re.IGNORECASE)
MAX_RANGE = 12


def named_pages(question: str, n_pages: int) -> list[int]:
    """PDF pages the question names directly, in order of mention (within 1..n_pages)."""
    pages: list[int] = []
    for match in _RANGE.finditer(question):
        low, high = sorted((int(match.group(1)), int(match.group(2))))
        if high - low <= MAX_RANGE:
            pages.extend(range(low, high + 1))
    pages.extend(int(m.group(1)) for m in _SINGLE.finditer(question))
    if _LAST.search(question):
        pages.append(n_pages)
    if _FIRST.search(question) and not re.search(r"back\s+cover", question, re.IGNORECASE):
        pages.append(1)
    return [p for p in dict.fromkeys(pages) if 1 <= p <= n_pages]


def mentions_labels(question: str) -> bool:
    """Whether the question names a labelled object (Figure 9, Table 3, ...): the reference
    graph is needed (and built) only then."""
    return bool(label_mentions(question))


def labelled_pages(question: str, graph: ReferenceGraph, *, max_targets: int = 2) -> list[int]:
    """Pages defining the labels the question mentions (unambiguous labels only)."""
    pages: list[int] = []
    for kind, label in sorted(label_mentions(question)):
        targets = graph.defining(kind, label)
        if 0 < len(targets) <= max_targets:
            pages.extend(targets)
    return list(dict.fromkeys(pages))


def reference_boosts(
    useful: Iterable[PageRef],
    graphs: Mapping[str, ReferenceGraph],
    *,
    weight: float,
    continuation_weight: float | None = None,
) -> dict[PageRef, float]:
    """alpha increments for the pages linked to the useful pages in their document's graph.

    A label link ("see Table 3" -> the page of Table 3) adds ``weight``; a continuation link adds
    ``continuation_weight`` (``weight`` when None). A page linked from several useful pages gets
    the sum; useful pages themselves get nothing here (their own label already counts).
    """
    if weight < 0 or (continuation_weight is not None and continuation_weight < 0):
        raise ValueError("reference weights must be non-negative")
    cont = weight if continuation_weight is None else continuation_weight
    useful = list(dict.fromkeys(useful))
    seeds = set(useful)
    boosts: dict[PageRef, float] = {}
    for ref in useful:
        graph = graphs.get(ref.doc_id)
        if graph is None:
            continue
        for page, kind in sorted(graph.linked(ref.page).items()):
            target = PageRef(ref.doc_id, page)
            if target in seeds:
                continue
            add = cont if kind == "continuation" else weight
            if add > 0:
                boosts[target] = boosts.get(target, 0.0) + add
    return boosts
