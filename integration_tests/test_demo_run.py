"""The demo end to end: generated report -> embedded store -> DocMemo with the offline reader."""

from __future__ import annotations

import shlex
from pathlib import Path

from llama_index_docmemo.cli import build_parser
from llama_index_docmemo.demo.run import NEXT_STEPS, run_demo


def test_demo_answers_every_question_and_recovers_the_distant_page(tmp_path: Path) -> None:
    lines: list[str] = []
    outcomes = run_demo(tmp_path / "cache", out=lines.append)
    assert [o.status for o in outcomes] == ["answered"] * 3
    assert all(o.found_all_evidence for o in outcomes)
    rd = outcomes[0]
    assert "35.8" in rd.answer
    assert rd.rounds >= 2, "the cross-page question should need a second round"
    assert any(line.startswith("  round 2:") for line in lines)
    # the computed difference is said to be computed, not unverified; the note says what happens
    computed = "(Computed: a figure of this answer is the difference of two cited figures.)"
    assert rd.answer.endswith(computed)
    assert all(o.agrees for o in outcomes) and not any("Unverified" in line for line in lines)
    assert lines[1].startswith("Reader: the offline reader") and "rarely" not in lines[1]
    assert "3 of 3 answers agree with the report" in lines[-len(NEXT_STEPS) - 2]
    assert lines[-len(NEXT_STEPS) :] == list(NEXT_STEPS)
    commands = [
        shlex.split(command, comments=True)
        for command in "\n".join(NEXT_STEPS[1:]).replace("\\\n", " ").splitlines()
    ]
    assert [c[:2] for c in commands] == [["docmemo", c] for c in ("index", "ask", "compare")]
    for command in commands:  # the next steps are commands the parser takes
        build_parser().parse_args(command[1:])
    page = outcomes[0].html.read_text()
    assert page.count('<img src="data:image/png;base64,') == 2  # pp. 6 and 19, boxes drawn
    assert "halvorsen-annual-report-2024.pdf p. 19" in page
    again = run_demo(tmp_path / "cache", out=lines.append)  # cached index is reused
    assert [o.answer for o in again] == [o.answer for o in outcomes]
