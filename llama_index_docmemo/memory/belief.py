"""Page Belief Memory: a Beta(alpha, beta) belief per page that a page holds evidence for the query.

Pure numpy over every page of the documents in scope. Updated by the reasoner's labels
(alpha += 1 useful, beta += 1 irrelevant), spread to neighbouring pages of the same document,
read by Thompson sampling or by posterior means. No I/O, no model calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

import numpy as np

from llama_index_docmemo.types import PageRef

Sampling = Literal["thompson", "greedy"]


class PageBeliefMemory:
    """Beta beliefs over all pages of a fixed set of documents.

    Args:
        doc_pages: number of pages of each document in scope.
        prior_alpha / prior_beta: the uninformed prior of every page.

    Pages are laid out document after document in two float arrays, so an update and a
    draw over thousands of pages are a few vector operations.
    """

    def __init__(
        self,
        doc_pages: Mapping[str, int],
        prior_alpha: float = 1.0,
        prior_beta: float = 1.0,
    ) -> None:
        if prior_alpha <= 0 or prior_beta <= 0:
            raise ValueError("Beta prior parameters must be positive")
        self._offsets: dict[str, int] = {}
        self._sizes: dict[str, int] = {}
        total = 0
        for doc_id, n_pages in doc_pages.items():
            if n_pages < 0:
                raise ValueError(f"document {doc_id!r} has a negative page count")
            self._offsets[doc_id] = total
            self._sizes[doc_id] = n_pages
            total += n_pages
        self.alpha = np.full(total, prior_alpha, dtype=np.float64)
        self.beta = np.full(total, prior_beta, dtype=np.float64)
        self._prior = (prior_alpha, prior_beta)
        self._informed = np.zeros(total, dtype=bool)  # has a prior from retrieval or any update

    # -- layout -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.alpha.shape[0]

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, PageRef) and self._index_or_none(ref) is not None

    def _index_or_none(self, ref: PageRef) -> int | None:
        offset = self._offsets.get(ref.doc_id)
        if offset is None or not 1 <= ref.page <= self._sizes[ref.doc_id]:
            return None
        return offset + ref.page - 1

    def index(self, ref: PageRef) -> int:
        """Position of ``ref`` in the arrays; KeyError for a page outside the scope."""
        idx = self._index_or_none(ref)
        if idx is None:
            raise KeyError(f"{ref} is not a page of the documents in scope")
        return idx

    def indices(self, refs: Iterable[PageRef]) -> np.ndarray:
        return np.fromiter((self.index(r) for r in refs), dtype=np.int64)

    def ref(self, index: int) -> PageRef:
        for doc_id, offset in self._offsets.items():
            if offset <= index < offset + self._sizes[doc_id]:
                return PageRef(doc_id, index - offset + 1)
        raise IndexError(index)

    def refs(self) -> list[PageRef]:
        return [PageRef(d, p) for d, n in self._sizes.items() for p in range(1, n + 1)]

    # -- state --------------------------------------------------------------------------------
    def mean(self, refs: Sequence[PageRef] | None = None) -> np.ndarray:
        """Posterior mean alpha / (alpha + beta) (of ``refs``, or of every page)."""
        if refs is None:
            return self.alpha / (self.alpha + self.beta)
        idx = self.indices(refs)
        return self.alpha[idx] / (self.alpha[idx] + self.beta[idx])

    def get(self, ref: PageRef) -> tuple[float, float]:
        idx = self.index(ref)
        return float(self.alpha[idx]), float(self.beta[idx])

    def informed(self, refs: Sequence[PageRef]) -> np.ndarray:
        """Whether each page's belief moved away from the uninformed prior."""
        return self._informed[self.indices(refs)]

    def informed_refs(self) -> list[PageRef]:
        """Pages whose belief moved away from the uninformed prior (labelled, propagated, primed)."""
        return [self.ref(int(i)) for i in np.flatnonzero(self._informed)]

    def set_prior_from_scores(
        self, refs: Sequence[PageRef], scores: np.ndarray, strength: float
    ) -> None:
        """Informative prior for pages seen for the first time: Beta(a0 + s*c, b0 + s*(1-c)).

        Only pages whose belief is still the uninformed prior get it, so counts never decrease
        and feedback is never overwritten.
        """
        if strength <= 0 or not refs:
            return
        idx = self.indices(refs)
        c = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
        fresh = ~self._informed[idx]
        a0, b0 = self._prior
        self.alpha[idx[fresh]] = a0 + strength * c[fresh]
        self.beta[idx[fresh]] = b0 + strength * (1.0 - c[fresh])
        self._informed[idx[fresh]] = True

    def update(
        self,
        useful: Iterable[PageRef] = (),
        irrelevant: Iterable[PageRef] = (),
        *,
        radius: int = 0,
        gamma: float = 0.5,
        weight: float = 1.0,
        same_section: Callable[[PageRef, PageRef], bool] | None = None,
        cross_section: float = 1.0,
    ) -> None:
        """Bayesian update from one round's labels, then spatial propagation from useful pages.

        A useful page i adds weight * gamma^|j-i| to alpha_j of pages j of the same document with
        0 < |j-i| <= radius. When ``same_section`` is given, a neighbour in another section gets
        ``cross_section`` times that (0: propagation stops at section boundaries).
        """
        useful = [r for r in useful if r in self]
        irrelevant = [r for r in irrelevant if r in self]
        if useful:
            np.add.at(self.alpha, self.indices(useful), 1.0)
            self._informed[self.indices(useful)] = True
        if irrelevant:
            np.add.at(self.beta, self.indices(irrelevant), 1.0)
            self._informed[self.indices(irrelevant)] = True
        if radius <= 0 or gamma <= 0 or weight <= 0:
            return
        for ref in useful:
            n_pages = self._sizes[ref.doc_id]
            for distance in range(1, radius + 1):
                for page in (ref.page - distance, ref.page + distance):
                    if not 1 <= page <= n_pages:
                        continue
                    neighbour = PageRef(ref.doc_id, page)
                    factor = 1.0
                    if same_section is not None and not same_section(ref, neighbour):
                        factor = cross_section
                    if factor <= 0:
                        continue
                    idx = self.index(neighbour)
                    self.alpha[idx] += factor * weight * gamma**distance
                    self._informed[idx] = True

    def add_alpha(self, weights: Mapping[PageRef, float]) -> None:
        """alpha_j += w_j (w_j >= 0) for pages in scope: evidence spread by a rule other than
        distance (e.g. along the document's reference graph); pages outside scope are ignored."""
        for ref, weight in weights.items():
            if weight < 0:
                raise ValueError(f"alpha increments must be non-negative, got {weight} for {ref}")
            idx = self._index_or_none(ref)
            if idx is not None and weight > 0:
                self.alpha[idx] += weight
                self._informed[idx] = True

    def draw(
        self,
        refs: Sequence[PageRef] | None,
        rng: np.random.Generator,
        sampling: Sampling = "thompson",
    ) -> np.ndarray:
        """theta per page (of ``refs``, or of every page): a Thompson draw from Beta(alpha, beta),
        or the posterior mean (greedy, which never touches ``rng``)."""
        if refs is None:
            a, b = self.alpha, self.beta
        else:
            idx = self.indices(refs)
            a, b = self.alpha[idx], self.beta[idx]
        if sampling == "greedy":
            return a / (a + b)
        return rng.beta(a, b)


def selection_scores(retrieval: np.ndarray, theta: np.ndarray, lam: float) -> np.ndarray:
    """score_i = (1 - lambda) * c_i + lambda * theta_i; lambda = 0 is the static ranking."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must lie in [0, 1], got {lam}")
    return (1.0 - lam) * np.asarray(retrieval, dtype=np.float64) + lam * np.asarray(
        theta, dtype=np.float64
    )


def normalise_scores(scores: Sequence[float]) -> np.ndarray:
    """Retrieval scores -> c in [0, 1], the best at 1, order kept.

    Positive scores (MaxSim, fusion) are divided by the maximum so that a clear winner stays
    clear; otherwise min-max.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s
    if s.min() >= 0 and s.max() > 0:
        return s / s.max()
    span = s.max() - s.min()
    return np.ones_like(s) if span == 0 else (s - s.min()) / span
