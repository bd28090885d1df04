"""Page Belief Memory: a Beta(alpha, beta) belief per page that a page holds evidence for the query.

Sparse: only pages a query has scored or labelled hold state. Updated by the reader's labels
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
    """Beta beliefs of the pages a query has scored or labelled; the prior everywhere else.

    Args:
        doc_pages: page counts of documents already known (more are added with
            :meth:`add_document` as they appear among the candidates).
        prior_alpha / prior_beta: the uninformed prior of every page.

    State is a dict keyed by :class:`PageRef` holding only pages whose belief moved away from
    the prior (primed by retrieval, labelled, or reached by propagation), so a query over
    500,000 pages costs what it touches, not what is in scope. Document sizes bound
    propagation at a document's first and last page.
    """

    def __init__(
        self,
        doc_pages: Mapping[str, int] | None = None,
        prior_alpha: float = 1.0,
        prior_beta: float = 1.0,
    ) -> None:
        if prior_alpha <= 0 or prior_beta <= 0:
            raise ValueError("Beta prior parameters must be positive")
        self._sizes: dict[str, int] = {}
        self._prior = (prior_alpha, prior_beta)
        self._state: dict[PageRef, tuple[float, float]] = {}
        for doc_id, n_pages in (doc_pages or {}).items():
            self.add_document(doc_id, n_pages)

    # -- scope --------------------------------------------------------------------------------
    def add_document(self, doc_id: str, n_pages: int) -> None:
        """Make a document's pages known (its size bounds propagation)."""
        if n_pages < 0:
            raise ValueError(f"document {doc_id!r} has a negative page count")
        self._sizes[doc_id] = n_pages

    def copy(self) -> PageBeliefMemory:
        """An independent copy (a query's state is a value: its rules change copies)."""
        other = PageBeliefMemory(prior_alpha=self._prior[0], prior_beta=self._prior[1])
        other._sizes = dict(self._sizes)
        other._state = dict(self._state)
        return other

    def __len__(self) -> int:
        """Pages with a belief of their own (the others hold the prior)."""
        return len(self._state)

    def __contains__(self, ref: object) -> bool:
        """Whether ``ref`` is a page of a known document."""
        if not isinstance(ref, PageRef):
            return False
        size = self._sizes.get(ref.doc_id)
        return size is not None and 1 <= ref.page <= size

    def refs(self) -> list[PageRef]:
        """Every page of the known documents (for small scopes and tests)."""
        return [PageRef(d, p) for d, n in self._sizes.items() for p in range(1, n + 1)]

    def _check(self, ref: PageRef) -> None:
        if ref not in self:
            raise KeyError(f"{ref} is not a page of the documents in scope")

    # -- state --------------------------------------------------------------------------------
    def get(self, ref: PageRef) -> tuple[float, float]:
        """(alpha, beta) of ``ref``; KeyError for a page outside the known documents."""
        self._check(ref)
        return self._state.get(ref, self._prior)

    def _arrays(self, refs: Sequence[PageRef] | None) -> tuple[np.ndarray, np.ndarray]:
        refs = self.refs() if refs is None else refs
        pairs = [self.get(r) for r in refs]
        if not pairs:
            return np.zeros(0), np.zeros(0)
        ab = np.asarray(pairs, dtype=np.float64)
        return ab[:, 0], ab[:, 1]

    @property
    def alpha(self) -> np.ndarray:
        """alpha of every page of the known documents, in :meth:`refs` order."""
        return self._arrays(None)[0]

    @property
    def beta(self) -> np.ndarray:
        return self._arrays(None)[1]

    def mean(self, refs: Sequence[PageRef] | None = None) -> np.ndarray:
        """Posterior mean alpha / (alpha + beta) (of ``refs``, or of every known page)."""
        a, b = self._arrays(refs)
        return a / (a + b)

    def informed_refs(self) -> list[PageRef]:
        """Pages whose belief moved away from the prior (labelled, propagated, primed), in the
        order they first did."""
        return list(self._state)

    def _add(self, ref: PageRef, d_alpha: float, d_beta: float) -> None:
        a, b = self._state.get(ref, self._prior)
        self._state[ref] = (a + d_alpha, b + d_beta)

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
        ``cross_section`` times that (0: propagation stops at section boundaries). Pages outside
        the known documents are ignored.
        """
        useful = [r for r in useful if r in self]
        irrelevant = [r for r in irrelevant if r in self]
        for ref in useful:
            self._add(ref, 1.0, 0.0)
        for ref in irrelevant:
            self._add(ref, 0.0, 1.0)
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
                    if factor > 0:
                        self._add(neighbour, factor * weight * gamma**distance, 0.0)

    def add_alpha(self, weights: Mapping[PageRef, float]) -> None:
        """alpha_j += w_j (w_j >= 0) for pages in scope: evidence spread by a rule other than
        distance (e.g. along the document's reference graph); pages outside scope are ignored."""
        for ref, weight in weights.items():
            if weight < 0:
                raise ValueError(f"alpha increments must be non-negative, got {weight} for {ref}")
            if weight > 0 and ref in self:
                self._add(ref, weight, 0.0)

    def draw(
        self,
        refs: Sequence[PageRef] | None,
        rng: np.random.Generator,
        sampling: Sampling = "thompson",
    ) -> np.ndarray:
        """theta per page (of ``refs``, or of every known page): a Thompson draw from
        Beta(alpha, beta), or the posterior mean (greedy, which never touches ``rng``)."""
        a, b = self._arrays(refs)
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
