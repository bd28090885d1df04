"""Propagation along the document's structure (pure): from useful pages to the pages they point at."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from llama_index_docmemo.memory.references import ReferenceGraph
from llama_index_docmemo.types import PageRef


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
