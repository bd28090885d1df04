"""The image policy: tokens and sizes per model family against the providers' published examples,
and the byte budget of a request's images (which rung each image goes at)."""

from __future__ import annotations

import itertools

import pytest

from llama_index_docmemo.llms.image_policy import (
    FAMILIES,
    LADDER,
    MIN_LONG_SIDE,
    fit_size,
    image_tokens,
    model_family,
    rung_scale,
    spend,
)

PAGE = (1159, 1500)  # a letter page rendered at a 1500-px long side


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gpt-4o", "openai"),
        ("gpt-4o-2024-08-06", "openai"),
        ("chatgpt-4o-latest", "openai"),
        ("gpt-4.1", "openai"),
        ("gpt-4.5-preview", "openai"),
        ("gpt-4-turbo", "openai"),
        ("openai/gpt-4o", "openai"),
        ("gpt-4o-mini", "openai-mini"),
        ("gpt-4.1-mini", "openai-patch"),
        ("gpt-4.1-nano", "openai-patch"),
        ("gpt-5-mini", "openai-patch"),
        ("o4-mini", "openai-patch"),
        ("gpt-5", "gpt-5"),
        ("o1", "openai-o"),
        ("o3-2025-04-16", "openai-o"),
        ("o3-mini", "default"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen-vl"),
        ("Qwen/Qwen2-VL-2B-Instruct", "qwen-vl"),
        ("qwen2.5vl:7b", "qwen-vl"),
        ("Qwen/QVQ-72B-Preview", "qwen-vl"),
        ("Qwen/Qwen3-VL-8B-Instruct", "qwen3-vl"),
        ("qwen3-vl:8b", "qwen3-vl"),
        ("claude-3-5-sonnet-20241022", "claude"),
        ("anthropic.claude-3-haiku-20240307-v1:0", "claude"),
        ("models/gemini-2.0-flash", "gemini"),
        ("gemini-1.5-pro", "gemini"),
        ("llava:13b", "default"),
        ("Qwen/Qwen2.5-7B-Instruct", "default"),
        ("", "default"),
    ],
)
def test_model_names_map_to_their_family(name: str, family: str) -> None:
    assert model_family(name) == family


@pytest.mark.parametrize(
    ("family", "size", "tokens"),
    [
        # OpenAI's examples: 1024^2 -> 768^2, 4 tiles; 2048x4096 -> 768x1536, 6 tiles.
        ("openai", (1024, 1024), 765),
        ("openai", (2048, 4096), 1105),
        ("openai", (4096, 8192), 1105),
        ("openai", (512, 512), 255),
        ("openai", (100, 100), 255),
        ("openai-o", (1024, 1024), 675),
        ("gpt-5", (1024, 1024), 630),
        ("openai-mini", (1024, 1024), 2833 + 4 * 5667),
        # patches: 1024^2 is 1024; 1800x2400 shrinks to 1056x1408, 33x44 = 1452 (OpenAI's example).
        ("openai-patch", (1024, 1024), 1024),
        ("openai-patch", (1800, 2400), 1452),
        # Claude's table: 200x200 ~54, 1092x1092 ~1590; a larger image is scaled to ~1600.
        ("claude", (200, 200), 54),
        ("claude", (1092, 1092), 1590),
        ("claude", (4000, 4000), 1599),
        # Qwen-VL: 1500x1159 -> 1512x1148 = 54x41 patches; a tiny image is raised to 56x56.
        ("qwen-vl", (1500, 1159), 54 * 41),
        ("qwen-vl", (10, 10), 4),
        ("qwen-vl", (28 * 200, 28 * 200), 16384),
        ("qwen3-vl", (1600, 1280), 50 * 40),
        ("gemini", (384, 384), 258),
        ("gemini", (385, 100), 258),
        ("gemini", (1536, 1536), 4 * 258),
        ("gemini", (1537, 100), 3 * 258),
        ("default", (280, 560), 200),
        ("default", (281, 560), 220),
    ],
)
def test_tokens_follow_the_published_formulas(
    family: str, size: tuple[int, int], tokens: int
) -> None:
    assert image_tokens(family, *size) == tokens


def test_unknown_families_and_empty_images_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown image family 'gpt'"):
        image_tokens("gpt", 10, 10)
    with pytest.raises(ValueError, match="positive sides"):
        fit_size("openai", 0, 10)
    with pytest.raises(ValueError, match="budget_tokens"):
        fit_size("openai", 10, 10, budget_tokens=0)


@pytest.mark.parametrize(
    ("family", "size"),
    [
        ("openai", (768, 994)),  # short side 768 (high detail's effective resolution)
        ("openai-o", (768, 994)),
        ("openai-patch", (1087, 1408)),  # within 1536 patches of 32 px
        ("qwen-vl", (2324, 2996)),  # multiples of 28: what smart_resize would send anyway
        ("qwen3-vl", (2304, 3008)),
        ("claude", (962, 1246)),  # within 1.2 megapixels
    ],
)
def test_a_page_is_sized_to_what_the_provider_uses(family: str, size: tuple[int, int]) -> None:
    fitted = fit_size(family, 1159 * 2, 1500 * 2)
    assert fitted == size
    assert image_tokens(family, *fitted) == image_tokens(family, 1159 * 2, 1500 * 2)


@pytest.mark.parametrize(("family", "tokens"), [("gemini", 4 * 258), ("default", 43 * 55)])
def test_without_a_published_downscale_the_long_side_is_capped(family: str, tokens: int) -> None:
    fitted = fit_size(family, 1159 * 2, 1500 * 2)
    assert fitted == (1186, 1536)
    assert image_tokens(family, *fitted) == tokens < image_tokens(family, 1159 * 2, 1500 * 2)


@pytest.mark.parametrize("family", FAMILIES)
def test_sizes_never_grow_and_keep_the_aspect_ratio(family: str) -> None:
    for width, height in [(300, 200), PAGE, (4000, 900), (900, 4000)]:
        w, h = fit_size(family, width, height)
        if family not in ("qwen-vl", "qwen3-vl"):  # Qwen rounds to the patch, up or down
            assert w <= width and h <= height
        assert abs(w / h - width / height) < 0.1 * width / height


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("budget", [300, 700, 1200, 2500])
def test_a_budget_is_kept_down_to_the_minimum_side(family: str, budget: int) -> None:
    w, h = fit_size(family, *PAGE, budget_tokens=budget)
    if max(w, h) > MIN_LONG_SIDE:
        assert image_tokens(family, w, h) <= budget
    else:  # the budget is below a legible page's cost: the minimum side, give or take a patch
        assert MIN_LONG_SIDE - 28 <= max(w, h) <= MIN_LONG_SIDE


@pytest.mark.parametrize("family", FAMILIES)
def test_more_budget_never_means_fewer_pixels(family: str) -> None:
    sizes = [fit_size(family, *PAGE, budget_tokens=b) for b in (200, 400, 800, 1600, 3200, None)]
    areas = [w * h for w, h in sizes]
    assert areas == sorted(areas)


def test_openai_budget_counts_whole_tiles() -> None:
    # 255 tokens is one tile: the page must fit 512x512; 425 is two: 512 wide, up to 1024 tall.
    assert max(fit_size("openai", *PAGE, budget_tokens=255)) == 512
    w, h = fit_size("openai", *PAGE, budget_tokens=425)
    assert w <= 512 and 650 <= h <= 664 and image_tokens("openai", w, h) == 425


def test_a_budget_below_the_smallest_image_keeps_the_minimum_side() -> None:
    w, h = fit_size("openai", *PAGE, budget_tokens=10)
    assert max(w, h) == MIN_LONG_SIDE
    assert fit_size("claude", 300, 200, budget_tokens=10) == (300, 200)  # already below it


# -- the byte budget -----------------------------------------------------------------------
def table_cost(table: list[list[int]], asked: list[tuple[int, int]] | None = None):
    def cost(image: int, rung: int) -> int:
        if asked is not None:
            asked.append((image, rung))
        return table[image][rung]

    return cost


def total(table: list[list[int]], levels: list[int | None]) -> int:
    return sum(table[i][r] for i, r in enumerate(levels) if r is not None)


def tables(count: int, rungs: int):
    """Every cost table of ``count`` images over ``rungs`` rungs with costs in 1..3, each image's
    cost non-increasing down its rungs (as lower quality and fewer pixels are)."""
    columns = [
        c for c in itertools.product(range(1, 4), repeat=rungs) if list(c) == sorted(c)[::-1]
    ]
    for rows in itertools.product(columns, repeat=count):
        yield [list(r) for r in rows]


@pytest.mark.parametrize(("count", "rungs"), [(1, 1), (1, 3), (2, 2), (3, 2), (2, 3), (3, 3)])
def test_every_small_case_fits_with_the_fewest_losses(count: int, rungs: int) -> None:
    for table in tables(count, rungs):
        for budget in range(0, 3 * count + 1):
            levels = spend(table_cost(table), count, budget, rungs)
            assert total(table, levels) <= budget
            assert all(r is None or 0 <= r < rungs for r in levels)  # never below the floor
            if total(table, [0] * count) <= budget:
                assert levels == [0] * count  # nothing shrinks that fits
            dropped = [i for i, r in enumerate(levels) if r is None]
            if dropped:
                # the lowest priorities go, only with every other image at the floor, and
                # only as many as needed: the first one left out would not have fitted
                assert dropped == list(range(count - len(dropped), count))
                assert all(r == rungs - 1 for r in levels if r is not None)
                back = [rungs - 1 if i == dropped[0] else r for i, r in enumerate(levels)]
                assert total(table, back) > budget


def test_the_largest_image_steps_down_first() -> None:
    table = [[10, 5, 4], [6, 3, 2]]
    assert spend(table_cost(table), 2, 12, 3) == [1, 0]  # 10 -> 5: 11 fits
    assert spend(table_cost(table), 2, 8, 3) == [1, 1]  # then the 6 (now largest)
    assert spend(table_cost(table), 2, 6, 3) == [2, 2]  # both at the floor: 4 + 2


def test_between_equal_images_the_lower_priority_shrinks_first() -> None:
    table = [[6, 3], [6, 3], [6, 3]]
    assert spend(table_cost(table), 3, 15, 2) == [0, 0, 1]
    assert spend(table_cost(table), 3, 12, 2) == [0, 1, 1]


def test_past_the_floor_the_last_images_are_left_out() -> None:
    table = [[9, 4], [9, 4], [9, 4]]
    assert spend(table_cost(table), 3, 8, 2) == [1, 1, None]
    assert spend(table_cost(table), 3, 3, 2) == [None, None, None]


def test_costs_are_asked_only_for_the_rungs_it_visits() -> None:
    asked: list[tuple[int, int]] = []
    spend(table_cost([[5, 1], [5, 1]], asked), 2, 10, 2)
    assert asked == [(0, 0), (1, 0)]  # it fits: no other encoding is made
    asked.clear()
    spend(table_cost([[5, 1, 1], [2, 1, 1]], asked), 2, 4, 3)
    assert asked == [(0, 0), (1, 0), (0, 1)]


def test_a_budget_needs_sense() -> None:
    with pytest.raises(ValueError, match="budget"):
        spend(table_cost([[1]]), 1, -1)
    assert spend(table_cost([]), 0, 0) == []


def test_the_ladder_only_goes_down() -> None:
    pairs = [(r.quality, r.scale) for r in LADDER]
    assert pairs[0] == (70, 1.0)  # the first rung is today's encoding, unchanged
    for (q0, s0), (q1, s1) in itertools.pairwise(pairs):
        assert (q1, s1) != (q0, s0) and q1 <= q0 and s1 <= s0


def test_a_rung_never_takes_the_long_side_below_the_floor() -> None:
    small = LADDER[-1]
    assert rung_scale(small, 1000) == max(small.scale, MIN_LONG_SIDE / 1000)
    assert rung_scale(small, 600) * 600 >= MIN_LONG_SIDE - 1e-9
    assert rung_scale(small, MIN_LONG_SIDE) == 1.0 == rung_scale(small, 200)  # kept as is
    assert rung_scale(LADDER[0], 5000) == 1.0
