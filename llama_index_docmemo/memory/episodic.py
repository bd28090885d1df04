"""Episodic Memory: what one query has done so far (queries, pages read, evidence, what is missing).

Pure state; the engine writes one entry per round and shows evidence and gaps to the reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llama_index_docmemo.types import EvidenceNote, Feedback, PageRef


@dataclass
class Episode:
    """One round: the query used, the pages read, the feedback received."""

    round: int
    query: str
    pages: list[PageRef]
    feedback: Feedback | None


@dataclass
class EpisodicMemory:
    """Per-query history across rounds."""

    question: str
    episodes: list[Episode] = field(default_factory=list)

    def record(
        self, round_: int, query: str, pages: list[PageRef], feedback: Feedback | None
    ) -> None:
        self.episodes.append(Episode(round_, query, list(pages), feedback))

    def copy(self) -> EpisodicMemory:
        """An independent copy (the episodes themselves are shared: nothing changes them)."""
        return EpisodicMemory(self.question, list(self.episodes))

    @property
    def queries(self) -> list[str]:
        return [self.question] + [e.query for e in self.episodes if e.query != self.question]

    @property
    def pages_read(self) -> list[PageRef]:
        """Pages read so far, in reading order, without repeats."""
        seen: dict[PageRef, None] = {}
        for episode in self.episodes:
            for ref in episode.pages:
                seen.setdefault(ref, None)
        return list(seen)

    def round_of(self, ref: PageRef) -> int | None:
        """The first round that read ``ref``."""
        for episode in self.episodes:
            if ref in episode.pages:
                return episode.round
        return None

    @property
    def evidence(self) -> list[EvidenceNote]:
        """Every note gathered, first occurrence of each (page, fact) kept."""
        seen: set[tuple[PageRef, str]] = set()
        notes: list[EvidenceNote] = []
        for episode in self.episodes:
            if episode.feedback is None:
                continue
            for note in episode.feedback.notes:
                key = (note.page, note.fact)
                if key not in seen:
                    seen.add(key)
                    notes.append(note)
        return notes

    @property
    def missing(self) -> list[str]:
        """What the latest round with feedback said is still missing."""
        for episode in reversed(self.episodes):
            if episode.feedback is not None:
                return list(episode.feedback.missing)
        return []

    @property
    def refined_query(self) -> str | None:
        for episode in reversed(self.episodes):
            if episode.feedback is not None and episode.feedback.refined_query:
                return episode.feedback.refined_query
        return None

    @property
    def useful_pages(self) -> list[PageRef]:
        seen: dict[PageRef, None] = {}
        for episode in self.episodes:
            if episode.feedback is not None:
                for ref in episode.feedback.useful_pages:
                    seen.setdefault(ref, None)
        return list(seen)

    @property
    def irrelevant_pages(self) -> set[PageRef]:
        return {
            ref
            for episode in self.episodes
            if episode.feedback is not None
            for ref in episode.feedback.irrelevant_pages
        }

    @property
    def last_answer(self) -> str | None:
        for episode in reversed(self.episodes):
            if episode.feedback is not None and episode.feedback.answer:
                return episode.feedback.answer
        return None
