"""Document Belief Memory: a Beta(a_d, b_d) belief per document that it holds the evidence.

Over a whole collection the right document is the first thing to find: a question's pages are
only worth reading inside it. The prior comes from the document stage's score
(:mod:`llama_index_docmemo.levers.document_stage`); the reader's page labels move it (a useful
page raises its document by one; an irrelevant page lowers it by a fraction, since a document
is not wrong because one of its pages is; a round that read a document and found nothing in it
lowers it by as much as the question does not name it, so a document the pages alone chose is
left after a fruitless round while a filing the question names is searched on). Each round the beliefs decide how many of the
round's pages each document gets (:meth:`DocumentBeliefMemory.allot`). No I/O, no model calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from llama_index_docmemo.memory.belief import Sampling
from llama_index_docmemo.types import PageRef


class DocumentBeliefMemory:
    """Beta beliefs over the documents a query's candidates came from.

    Args:
        prior_strength: pseudo-counts the document score is worth: a document scored c in
            [0, 1] starts at Beta(1 + s*c, 1 + s*(1 - c)).
        irrelevant_weight: b_d added per page of d labelled irrelevant (a useful page adds 1
            to a_d).
        miss_weight: b_d added once for a round that read pages of d and found none of them
            useful, times how little the question names d (1 - its card match): the reader's
            labels can take back a choice the question did not make.
    """

    def __init__(
        self, prior_strength: float = 4.0, irrelevant_weight: float = 0.03, miss_weight: float = 1.0
    ) -> None:
        if prior_strength < 0 or irrelevant_weight < 0 or miss_weight < 0:
            raise ValueError(
                "prior_strength, irrelevant_weight and miss_weight must be non-negative"
            )
        self.prior_strength = prior_strength
        self.irrelevant_weight = irrelevant_weight
        self.miss_weight = miss_weight
        self._state: dict[str, tuple[float, float]] = {}

    def copy(self) -> DocumentBeliefMemory:
        """An independent copy (a query's state is a value: its rules change copies)."""
        other = DocumentBeliefMemory(self.prior_strength, self.irrelevant_weight, self.miss_weight)
        other._state = dict(self._state)
        return other

    def __len__(self) -> int:
        return len(self._state)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._state

    @property
    def documents(self) -> list[str]:
        """The documents with a belief, in the order they were added."""
        return list(self._state)

    def get(self, doc_id: str) -> tuple[float, float]:
        """(a_d, b_d); KeyError for a document never added."""
        return self._state[doc_id]

    def mean(self, doc_id: str) -> float:
        a, b = self._state[doc_id]
        return a / (a + b)

    def add(self, scores: Mapping[str, float]) -> None:
        """Documents seen for the first time get their prior from their score (clipped to
        [0, 1]); a document already held keeps its belief (labels are never overwritten)."""
        s = self.prior_strength
        for doc_id, score in scores.items():
            if doc_id not in self._state:
                c = min(max(float(score), 0.0), 1.0)
                self._state[doc_id] = (1.0 + s * c, 1.0 + s * (1.0 - c))

    def update(
        self,
        useful: Iterable[PageRef] = (),
        irrelevant: Iterable[PageRef] = (),
        named: Mapping[str, float] | None = None,
    ) -> None:
        """A round's page labels moved to their documents (documents not held are ignored);
        ``named``: each document's card match with the question, in [0, 1] (none: 0)."""
        useful, irrelevant = list(useful), list(irrelevant)
        found = {ref.doc_id for ref in useful}
        named = named or {}
        for doc_id in {ref.doc_id for ref in irrelevant} - found:
            if doc_id in self._state:
                a, b = self._state[doc_id]
                self._state[doc_id] = (a, b + self.miss_weight * (1.0 - named.get(doc_id, 0.0)))
        for ref in useful:
            if ref.doc_id in self._state:
                a, b = self._state[ref.doc_id]
                self._state[ref.doc_id] = (a + 1.0, b)
        for ref in irrelevant:
            if ref.doc_id in self._state:
                a, b = self._state[ref.doc_id]
                self._state[ref.doc_id] = (a, b + self.irrelevant_weight)

    def draw(self, rng: np.random.Generator, sampling: Sampling) -> dict[str, float]:
        """theta_d per document: a Thompson draw, or the posterior mean (greedy, which never
        touches ``rng``)."""
        docs = self.documents
        if not docs:
            return {}
        ab = np.asarray([self._state[d] for d in docs], dtype=np.float64)
        theta = ab[:, 0] / ab.sum(axis=1) if sampling == "greedy" else rng.beta(ab[:, 0], ab[:, 1])
        return dict(zip(docs, (float(t) for t in theta), strict=True))

    def allot(
        self,
        k: int,
        rng: np.random.Generator,
        sampling: Sampling,
        *,
        max_documents: int = 2,
        share: float = 0.9,
        open_pages: Mapping[str, int] | None = None,
    ) -> dict[str, int]:
        """How many of a round's ``k`` pages each document gets, best belief first.

        The documents are ranked by their draw; the best gets all ``k`` unless others come
        within ``share`` of its theta (at most ``max_documents`` in all: a question comparing
        two filings holds two), and then the pages are split in proportion to theta. A
        document with fewer unread pages than its share (``open_pages``) passes the rest on.
        """
        theta = self.draw(rng, sampling)
        if k <= 0 or not theta:
            return {}
        ranked = sorted(theta, key=lambda d: (-theta[d], d))
        if open_pages is not None:
            ranked = [d for d in ranked if open_pages.get(d, 0) > 0]
        if not ranked:
            return {}
        best = theta[ranked[0]]
        chosen = [d for d in ranked[:max_documents] if theta[d] >= share * best] or ranked[:1]
        total = sum(theta[d] for d in chosen) or 1.0
        allotted = _proportional(k, [theta[d] / total for d in chosen])
        out: dict[str, int] = {}
        spare = 0
        for doc_id, pages in zip(chosen, allotted, strict=True):
            room = pages + spare if open_pages is None else min(pages + spare, open_pages[doc_id])
            spare = pages + spare - room
            if room > 0:
                out[doc_id] = room
        for doc_id in ranked:  # what the chosen documents cannot take goes down the ranking
            if spare <= 0:
                break
            room = min(spare, (open_pages or {}).get(doc_id, spare) - out.get(doc_id, 0))
            if room > 0:
                out[doc_id] = out.get(doc_id, 0) + room
                spare -= room
        return out

    def as_dict(self) -> dict[str, tuple[float, float]]:
        """Every document's (a_d, b_d), for the trace."""
        return dict(self._state)


def _proportional(k: int, shares: list[float]) -> list[int]:
    """``k`` split by ``shares`` (largest remainders; the first share wins ties, so the best
    document never gets fewer pages than a worse one)."""
    raw = [k * s for s in shares]
    counts = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in order[: k - sum(counts)]:
        counts[i] += 1
    return counts
