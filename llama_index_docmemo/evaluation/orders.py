"""Which pages a baseline reads next: pure functions over the first-round ranking and the labels so far.

Every baseline starts from the same first-round ranking DocMemo starts from (the store's candidates for
the question, best first), so round 1 is identical across engines and any difference comes from what
an engine does with the reader's labels afterwards.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from llama_index_docmemo.types import PageRef

NEIGHBOUR_RADIUS = 2


def next_in_ranking(ranking: Sequence[PageRef], read: Collection[PageRef], k: int) -> list[PageRef]:
    """The first ``k`` pages of ``ranking`` not read yet (``static-paged``; ``static@K`` with all of K)."""
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    seen = set(read)
    out: list[PageRef] = []
    for ref in ranking:
        if len(out) == k:
            break
        if ref not in seen:
            out.append(ref)
            seen.add(ref)
    return out


def neighbour_pages(
    useful: Sequence[PageRef],
    n_pages: dict[str, int],
    *,
    radius: int = NEIGHBOUR_RADIUS,
) -> list[PageRef]:
    """Pages within ``radius`` of a page judged useful, nearest first.

    Order: by distance (1 before 2), then by the order in which the useful pages were judged, then the
    page before the one after. Pages outside ``1..n_pages[doc]`` are left out; a document absent from
    ``n_pages`` only bounds its pages below.
    """
    if radius < 0:
        raise ValueError(f"radius must be non-negative, got {radius}")
    out: list[PageRef] = []
    seen: set[PageRef] = set(useful)
    for distance in range(1, radius + 1):
        for ref in useful:
            for page in (ref.page - distance, ref.page + distance):
                limit = n_pages.get(ref.doc_id)
                if page < 1 or (limit is not None and page > limit):
                    continue
                candidate = PageRef(ref.doc_id, page)
                if candidate not in seen:
                    seen.add(candidate)
                    out.append(candidate)
    return out


def next_neighbours(
    ranking: Sequence[PageRef],
    useful: Sequence[PageRef],
    read: Collection[PageRef],
    k: int,
    n_pages: dict[str, int],
    *,
    radius: int = NEIGHBOUR_RADIUS,
) -> list[PageRef]:
    """``neighbours``: unread pages near the useful ones first, the rest from the ranking."""
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    seen = set(read)
    near = [ref for ref in neighbour_pages(useful, n_pages, radius=radius) if ref not in seen]
    chosen = near[:k]
    return chosen + next_in_ranking(ranking, seen | set(chosen), k - len(chosen))
