"""benchmarks/crop_coverage.py's JSON and Markdown: halves, per-source rates, intervals (no data needed)."""

from __future__ import annotations

from benchmark_module import load_benchmark

bench = load_benchmark("crop_coverage")


def test_json_has_both_halves_per_source_and_the_first_variant_on_top() -> None:
    counts = {
        "default": {
            "tuning": {"all": [10, 7, 6], "Table": [4, 4, 4], "Figure": [6, 3, 2]},
            "report": {"all": [5, 4, 3], "Chart": [5, 4, 3]},
            "all": {"all": [15, 11, 9]},
        },
        "no_model": {"tuning": {"all": [10, 2, 1]}, "report": {}, "all": {"all": [10, 2, 1]}},
    }
    report = bench.to_json(counts, {"default": 0.5, "no_model": 0.2})
    assert report["variant"] == "default" and report["iou"] == 0.3
    assert report["tuning"]["n_boxes"] == 10
    assert report["tuning"]["detected"] == 0.7 and report["tuning"]["selected"] == 0.6
    assert report["report"]["selected"] == 0.6
    assert report["tuning"]["by_source"]["Figure"] == {
        "n_boxes": 6,
        "detected": 0.5,
        "selected": 2 / 6,
        "selected_ci": report["tuning"]["by_source"]["Figure"]["selected_ci"],
    }
    lo, hi = report["tuning"]["selected_ci"]
    assert lo < 0.6 < hi
    assert set(report["report"]["by_source"]) == {"Chart"}
    assert report["variants"]["no_model"]["tuning"]["selected"] == 0.1
    assert report["variants"]["no_model"]["report"]["n_boxes"] == 0
    markdown = bench.render(report)
    assert "| default | tuning | Figure | 6 | 50.0% | 33.3% [" in markdown
    assert "| no_model | report |" not in markdown  # an empty half is left out


def test_caps_are_the_postprocessors_defaults() -> None:
    from llama_index_docmemo.postprocessors import CropPostprocessor

    caps, crops = bench.default_caps(), CropPostprocessor()
    assert (caps.max_crops, caps.max_table_crops, caps.max_per_page, caps.min_side) == (
        crops.max_crops,
        crops.max_table_crops,
        crops.max_crops_per_page,
        crops.min_side_pt,
    )
