"""A simulated reader that labels pages from the gold evidence, to isolate the retrieval state.

It never refines the query and never reads the page content, so any gain a DocMemo configuration shows
with it comes from how pages are selected. Its label of a page is a deterministic function of
(seed, question key, page, how many times the page was read before), so every engine reading a page for
the first time gets the same label: engines are compared on the same noise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from llama_index_docmemo.readers.base import EvidenceNote, Feedback, Reader, ReaderInput
from llama_index_docmemo.types import PageRef


def uniform_draw(*parts: object) -> float:
    """A reproducible draw in [0, 1) from its inputs (independent of call order)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class SimulatedReader(Reader):
    """Labels each page read: gold pages useful with probability 1 - fn, others useful with probability fp.

    Its status is "answered" once every gold page has been read and recognised as useful, else
    "need_more" (a question without gold pages never ends early). State is per question and is reset
    when round 1 starts, or with :meth:`set_question`.

    Args:
        gold: the question's gold evidence pages.
        fn: false-negative rate (a gold page labelled irrelevant).
        fp: false-positive rate (another page labelled useful).
        seed: seed of the label noise.
        key: identifies the question in the noise (e.g. its qid), so questions get independent labels.
    """

    name = "simulated"

    def __init__(
        self,
        gold: Collection[PageRef] = (),
        *,
        fn: float = 0.2,
        fp: float = 0.05,
        seed: int = 0,
        key: str = "",
    ) -> None:
        for label, rate in (("fn", fn), ("fp", fp)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{label} must be in [0, 1], got {rate}")
        self.fn = fn
        self.fp = fp
        self.seed = seed
        self.set_question(gold, key=key)

    def set_question(self, gold: Collection[PageRef], *, key: str = "") -> None:
        """Point the reader at the next question (the runner reuses one instance per engine)."""
        self.gold = frozenset(gold)
        self.key = key
        self._reset()

    def _reset(self) -> None:
        self._times_read: dict[PageRef, int] = {}
        self._recognised: set[PageRef] = set()

    def label(self, ref: PageRef, nth_read: int = 0) -> bool:
        """Whether the page is labelled useful on its ``nth_read``-th read (0 = first)."""
        draw = uniform_draw(self.seed, self.key, ref.doc_id, ref.page, nth_read)
        return draw >= self.fn if ref in self.gold else draw < self.fp

    def read(self, inp: ReaderInput) -> Feedback:
        if inp.round == 1:
            self._reset()
        useful: list[PageRef] = []
        irrelevant: list[PageRef] = []
        for view in inp.pages:
            nth = self._times_read.get(view.ref, 0)
            self._times_read[view.ref] = nth + 1
            if self.label(view.ref, nth):
                useful.append(view.ref)
            else:
                irrelevant.append(view.ref)
        self._recognised |= {ref for ref in useful if ref in self.gold}
        done = bool(self.gold) and self.gold <= self._recognised
        return Feedback(
            answer="simulated" if done else None,
            useful_pages=useful,
            irrelevant_pages=irrelevant,
            notes=[EvidenceNote(page=ref, fact="simulated: page judged useful") for ref in useful],
            status="answered" if done else "need_more",
        )
