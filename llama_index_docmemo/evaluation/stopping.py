"""When an engine stops reading: the stop modes of an evaluation, applied to any reader's feedback.

Every engine that reads in rounds (DocMemo, its ablations, ``static-paged``, ``neighbours``) asks the
reader after each round; the reader's ``status`` decides whether it goes on. The evaluation puts one
:class:`StopControl` between the engine and the reader, so every engine gets the same stop rule:

- ``never`` (the primary protocol): no early stop; every engine reads its full budget (T rounds of k
  pages). Only the final round's answer is kept.
- ``noisy``: an imperfect stop signal computed from the gold pages: once every gold page has been read
  and labelled useful the reader says "answered" with probability ``1 - p_miss`` (it misses the moment
  otherwise), and before that it says "answered" anyway with probability ``p_early`` (it stops too
  early). The draws depend on (seed, question, round) only, so engines are compared on the same draws.
- ``oracle``: "answered" exactly when every gold page has been read and labelled useful. This sees the
  gold labels: it is an **upper bound (oracle stop)**, never a fair comparison.
- ``reader``: the reader's own status (real readers only; the simulated reader has no stop of its own).

The control also records every page label the reader gave, so a report can measure a real reader's
false-negative and false-positive rates against the gold pages.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from llama_index_docmemo.evaluation.simulated import uniform_draw
from llama_index_docmemo.readers.base import EvidenceNote, Feedback, Reader, ReaderInput
from llama_index_docmemo.types import PageRef

StopMode = Literal["never", "noisy", "oracle", "reader"]
STOP_MODES: tuple[str, ...] = ("never", "noisy", "oracle", "reader")
DEFAULT_P_EARLY = 0.1
DEFAULT_P_MISS = 0.2
ORACLE_LABEL = "upper bound (oracle stop)"


def stop_label(mode: str) -> str:
    """How a stop mode is named in reports (the oracle always as an upper bound)."""
    return {
        "never": "fixed budget (no early stop)",
        "noisy": "noisy stop signal",
        "oracle": ORACLE_LABEL,
        "reader": "the reader's own stop signal",
    }[mode]


@dataclass(frozen=True)
class StopRule:
    """A stop mode and, for ``noisy``, its error probabilities."""

    mode: StopMode = "never"
    p_early: float = DEFAULT_P_EARLY
    p_miss: float = DEFAULT_P_MISS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in STOP_MODES:
            raise ValueError(f"stop mode must be one of {', '.join(STOP_MODES)}, got {self.mode!r}")
        for name, value in (("p_early", self.p_early), ("p_miss", self.p_miss)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")

    def says_answered(
        self, *, own: bool, gold_recognised: bool, key: str, round_: int, final: bool
    ) -> bool:
        """Whether the reader's status after ``round_`` is "answered" under this rule.

        Args:
            own: the reader's own verdict ("answered").
            gold_recognised: every gold page read so far and labelled useful (needs gold pages).
            key: the question (its qid), for the noisy draws.
            round_: 1-based round.
            final: the engine's last round (no stop decision left to make).
        """
        if self.mode == "reader":
            return own
        if final:
            return own if self.mode == "never" else gold_recognised
        if self.mode == "never":
            return False
        if self.mode == "oracle":
            return gold_recognised
        draw = uniform_draw(self.seed, key, "stop", round_)
        return draw >= self.p_miss if gold_recognised else draw < self.p_early


class StopControl(Reader):
    """Wraps a reader: applies a :class:`StopRule` to its status and records its page labels.

    One instance per engine; :meth:`set_question` before each question. ``useful`` and ``judged``
    then hold the pages labelled useful and every page labelled at all.
    """

    def __init__(self, inner: Reader, rule: StopRule) -> None:
        self.inner = inner
        self.rule = rule
        self.name = getattr(inner, "name", "reader")
        self.set_question((), key="")

    def set_question(self, gold: Collection[PageRef], *, key: str) -> None:
        self.gold = frozenset(gold)
        self.key = key
        self.useful: set[PageRef] = set()
        self.judged: set[PageRef] = set()

    def _apply(self, inp: ReaderInput, feedback: Feedback) -> Feedback:
        if inp.round == 1:
            self.useful, self.judged = set(), set()
        shown = {view.ref for view in inp.pages}
        self.useful |= set(feedback.useful_pages) & shown
        self.judged |= shown
        recognised = bool(self.gold) and self.gold <= self.useful
        answered = self.rule.says_answered(
            own=feedback.status == "answered",
            gold_recognised=recognised,
            key=self.key,
            round_=inp.round,
            final=inp.final_round,
        )
        if self.rule.mode == "reader":
            return feedback
        if answered:
            status, answer = "answered", feedback.answer or "(stop signal)"
        elif inp.final_round:
            status = "need_more" if feedback.status == "answered" else feedback.status
            answer = feedback.answer
        else:  # "unanswerable" too: only the stop rule may end the reading early
            status, answer = "need_more", None
        if status == feedback.status and answer == feedback.answer:
            return feedback
        return feedback.model_copy(update={"status": status, "answer": answer})

    def read(self, inp: ReaderInput) -> Feedback:
        return self._apply(inp, self.inner.read(inp))

    async def aread(self, inp: ReaderInput) -> Feedback:
        return self._apply(inp, await self.inner.aread(inp))

    def synthesize(self, question: str, evidence: list[EvidenceNote], draft: str | None) -> str:
        return self.inner.synthesize(question, evidence, draft)
