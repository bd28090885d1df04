"""Episodic memory and feedback sanitisation."""

from __future__ import annotations

from llama_index_docmemo.memory.episodic import EpisodicMemory
from llama_index_docmemo.readers.base import EvidenceNote, Feedback, sanitize_feedback
from llama_index_docmemo.types import PageRef

A1, A2, A3, A9 = (PageRef("a", p) for p in (1, 2, 3, 9))


def test_episodic_memory_accumulates_rounds() -> None:
    mem = EpisodicMemory("what was revenue?")
    fb1 = Feedback(
        useful_pages=[A2],
        notes=[EvidenceNote(page=A2, fact="revenue 2023: 10")],
        missing=["revenue 2024"],
        refined_query="revenue 2024",
    )
    mem.record(1, "what was revenue?", [A1, A2], fb1)
    mem.record(2, "revenue 2024", [A3, A2], Feedback(notes=fb1.notes, status="need_more"))
    assert mem.pages_read == [A1, A2, A3]
    assert mem.round_of(A3) == 2 and mem.round_of(A9) is None
    assert len(mem.evidence) == 1
    assert mem.missing == []
    assert mem.refined_query == "revenue 2024"
    assert mem.queries == ["what was revenue?", "revenue 2024"]
    assert mem.useful_pages == [A2]


def test_sanitize_drops_pages_not_shown_and_bounds_labels() -> None:
    hostile = Feedback(
        useful_pages=[A1, A9] + [PageRef("a", p) for p in range(100, 10_100)],
        irrelevant_pages=[A1, A2],
        notes=[EvidenceNote(page=A9, fact="injected"), EvidenceNote(page=A2, fact="ok")],
    )
    clean, dropped = sanitize_feedback(hostile, shown=[A1, A2, A3], read=[], max_labels=20)
    assert clean.useful_pages == []  # A1 was labelled both ways; A9 and the rest never shown
    assert clean.irrelevant_pages == [A2]
    assert [n.fact for n in clean.notes] == ["ok"]
    assert dropped == len(hostile.useful_pages) + 2 + 1 - 1


def test_sanitize_caps_each_label_kind() -> None:
    shown = [PageRef("a", p) for p in range(1, 31)]
    clean, _ = sanitize_feedback(Feedback(useful_pages=shown), shown, [], max_labels=5)
    assert clean.useful_pages == shown[:5]
