"""The offline-reader benchmark's scoring helpers (the script itself needs a store and the data)."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark

bench = load_benchmark("offline_reader")


@pytest.mark.parametrize(
    ("gold", "fmt", "text", "expected"),
    [
        ("1,184", "Int", "- [p. 11] |Nordic|1184|1,102|", True),
        ("29%", "Float", "West: 29 per cent agree", True),
        ("29%", "Float", "West: 129 agree", False),
        ("Less well-off", "Str", "... see their children as less well off (p. 5)", True),
        ("Touch", "Str", "Touching the screen", False),
        ("['2015-03-24', '2015-03-25']", "List", "dated 2015-03-24, filed 2015-03-25", True),
        ("['2015-03-24', '2015-03-25']", "List", "dated 2015-03-24", False),
    ],
)
def test_gold_in_text_matches_whole_words_and_values(
    gold: str, fmt: str, text: str, expected: bool
) -> None:
    assert bench.gold_in_text(gold, fmt, text) is expected


def test_split_is_the_teams_fixed_rule() -> None:
    assert {bench.split_of(f"doc-{i}.pdf") for i in range(20)} == {"tune", "report"}
    assert bench.split_of("PH_2016.06.08_Economy-Final.pdf") == bench.split_of(
        "PH_2016.06.08_Economy-Final.pdf"
    )


def test_wilson_interval_contains_the_rate_and_stays_in_bounds() -> None:
    lo, hi = bench.wilson_interval(3, 100)
    assert 0.0 <= lo < 0.03 < hi <= 1.0
    assert bench.wilson_interval(0, 0) == (0.0, 1.0)
    assert bench.wilson_interval(0, 10)[0] == 0.0
