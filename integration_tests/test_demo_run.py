"""The demo end to end: generated report -> embedded store -> DocMemo with the offline reasoner."""

from __future__ import annotations

from pathlib import Path

from llama_index_docmemo.demo.run import run_demo


def test_demo_answers_every_question_and_recovers_the_distant_page(tmp_path: Path) -> None:
    lines: list[str] = []
    outcomes = run_demo(tmp_path / "cache", out=lines.append)
    assert [o.status for o in outcomes] == ["answered"] * 3
    assert all(o.found_all_evidence for o in outcomes)
    rd = outcomes[0]
    assert "35.8" in rd.answer
    assert rd.rounds >= 2, "the cross-page question should need a second round"
    assert any(line.startswith("  round 2:") for line in lines)
    again = run_demo(tmp_path / "cache", out=lines.append)  # cached index is reused
    assert [o.answer for o in again] == [o.answer for o in outcomes]
