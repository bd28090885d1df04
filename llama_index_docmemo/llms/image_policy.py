"""The image policy, pure: the pixels worth sending per model family and what an image costs
in tokens (the providers' published sizing rules), and a request's byte budget spent across its
images (:func:`spend`).

A provider resizes what it is sent to its own effective resolution and charges tokens for what
is left; pixels beyond that travel for nothing. :func:`fit_size` gives the size worth sending
(the provider's own resize, then smaller while an image costs more than a token budget) and
:func:`image_tokens` the tokens an image of a given size costs, so that requests can be sized
and their image tokens estimated without a server. The rules, as published in 2025:

- ``openai`` (gpt-4o, gpt-4.1, gpt-4.5, gpt-4-turbo), ``openai-o`` (o1, o3), ``gpt-5`` and
  ``openai-mini`` (gpt-4o-mini), high detail: fit in 2048x2048, then the short side scaled to
  768; ``base + tile * n`` over 512-px tiles (85+170, 75+150, 70+140, 2833+5667).
- ``openai-patch`` (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): 32-px patches, at most 1536
  (scaled down to fit); the count is returned (OpenAI bills it times 1.62-2.46 by model).
- ``qwen-vl`` (Qwen2-VL, Qwen2.5-VL, QVQ): ``smart_resize`` to multiples of 28 within
  ``min_pixels`` 56*56 and ``max_pixels`` 16384*28*28 (the processor's defaults, which vLLM
  uses); one token per 28x28. ``qwen3-vl``: the same with 32 px and 256*256..4096*4096 pixels.
- ``claude``: long side at most 1568 and about 1600 tokens (1.2 megapixels); ``w*h/750``.
- ``gemini``: 258 tokens when both sides are at most 384, else 258 per 768x768 tile; Google
  publishes no downscale, so :func:`fit_size` caps the long side at 1536 (2x2 tiles) itself.
- ``default`` (any other model): long side capped at 1536 and one token per 28x28 patch, the
  rule of the ViT-patch VLMs that vLLM and Ollama serve.

The byte budget (:func:`spend`): lower JPEG quality and fewer pixels, the largest image first, down
to a floor. A request carries its images in base64 inside the JSON body, so a round of five dense
pages and three crops at gpt-4o's full resolution weighs 1.7 MB, while the path to a model often
refuses bodies over 1 MB (nginx's default ``client_max_body_size``, a common proxy in front of
self-hosted servers; LLM gateways and text-generation-inference have limits of their own) and every
byte is upload time. The providers' own ceilings are far above: OpenAI 50 MB of images a request
(20 MB an image), Anthropic 32 MB a request (5 MB an image), Gemini 20 MB of inline data.
:func:`spend` decides, for images in priority order, which rung of :data:`LADDER` each is sent at
so that their sum fits a budget: it steps down the largest image one rung at a time, and only when
every image is at the floor leaves out the lowest-priority ones (their pages still go as text).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

FAMILIES = (
    "openai",
    "openai-o",
    "gpt-5",
    "openai-mini",
    "openai-patch",
    "qwen-vl",
    "qwen3-vl",
    "claude",
    "gemini",
    "default",
)
"""Every family :func:`model_family` returns and :func:`image_tokens` / :func:`fit_size` take."""

MIN_LONG_SIDE = 512
"""A token budget never shrinks an image's long side below this: a page's text would be lost."""

_TILES = {  # family: (base tokens, tokens per 512-px tile)
    "openai": (85, 170),
    "openai-o": (75, 150),
    "gpt-5": (70, 140),
    "openai-mini": (2833, 5667),
}
_PATCH_SIDE, _MAX_PATCHES = 32, 1536
_QWEN = {  # family: (pixels per token side, min_pixels, max_pixels)
    "qwen-vl": (28, 56 * 56, 16384 * 28 * 28),
    "qwen3-vl": (32, 256 * 256, 4096 * 4096),
}
_CLAUDE_LONG_SIDE, _CLAUDE_MAX_PIXELS = 1568, 1600 * 750
_GEMINI_TILE, _GEMINI_TOKENS, _GEMINI_SMALL = 768, 258, 384
_CAPPED_LONG_SIDE = 1536  # gemini and default: no published downscale, capped here
_DEFAULT_PATCH = 28

_NAMES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"qwen3[-_.]?vl"), "qwen3-vl"),
    (re.compile(r"qwen[\d.]*[-_.]?vl|qvq"), "qwen-vl"),
    (re.compile(r"claude"), "claude"),
    (re.compile(r"gemini"), "gemini"),
    (re.compile(r"^(gpt-4\.1-(mini|nano)|gpt-5-(mini|nano)|o4-mini)"), "openai-patch"),
    (re.compile(r"^gpt-4o-mini"), "openai-mini"),
    (re.compile(r"^gpt-5"), "gpt-5"),
    (re.compile(r"^(o1|o3)(?!-mini)"), "openai-o"),
    (re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-4-vision)"), "openai"),
)


def model_family(model_name: str) -> str:
    """The sizing family of a model name ("gpt-4o", "Qwen/Qwen2.5-VL-7B-Instruct",
    "anthropic.claude-3-5-sonnet-...", "models/gemini-2.0-flash"); ``"default"`` if unknown."""
    bare = model_name.strip().lower().rsplit("/", 1)[-1]
    for pattern, family in _NAMES:
        if pattern.search(bare):
            return family
    return "default"


def _check(family: str, width: int, height: int) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown image family {family!r} (one of {', '.join(FAMILIES)})")
    if width < 1 or height < 1:
        raise ValueError(f"an image needs positive sides, not {width}x{height}")


def _scaled(width: int, height: int, scale: float) -> tuple[int, int]:
    """``width x height`` times ``scale`` (never up), sides at least 1 px."""
    if scale >= 1:
        return width, height
    # the epsilon keeps a side scaled onto a target (768) from landing a float's width below it
    return max(1, math.floor(width * scale + 1e-9)), max(1, math.floor(height * scale + 1e-9))


def _qwen_resize(family: str, width: int, height: int) -> tuple[int, int]:
    """Qwen-VL's ``smart_resize``: sides to multiples of the patch, pixels within the bounds."""
    factor, min_pixels, max_pixels = _QWEN[family]
    w_bar = max(factor, round(width / factor) * factor)
    h_bar = max(factor, round(height / factor) * factor)
    if w_bar * h_bar > max_pixels:
        beta = math.sqrt(width * height / max_pixels)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
    elif w_bar * h_bar < min_pixels:
        beta = math.sqrt(min_pixels / (width * height))
        w_bar = math.ceil(width * beta / factor) * factor
        h_bar = math.ceil(height * beta / factor) * factor
    return w_bar, h_bar


def _patch_resize(width: int, height: int) -> tuple[int, int]:
    """OpenAI's patch rule: scaled down until whole 32-px patches, at most 1536, cover it."""
    if math.ceil(width / _PATCH_SIDE) * math.ceil(height / _PATCH_SIDE) <= _MAX_PATCHES:
        return width, height
    shrink = math.sqrt(_PATCH_SIDE**2 * _MAX_PATCHES / (width * height))
    cols, rows = width * shrink / _PATCH_SIDE, height * shrink / _PATCH_SIDE
    shrink *= min(math.floor(cols) / cols, math.floor(rows) / rows)
    return _scaled(width, height, shrink)


def _provider_size(family: str, width: int, height: int) -> tuple[int, int]:
    """The size the provider turns a ``width x height`` image into before counting tokens."""
    if family in _TILES:
        width, height = _scaled(width, height, 2048 / max(width, height))
        return _scaled(width, height, 768 / min(width, height))
    if family == "openai-patch":
        return _patch_resize(width, height)
    if family in _QWEN:
        return _qwen_resize(family, width, height)
    if family == "claude":
        scale = min(
            _CLAUDE_LONG_SIDE / max(width, height),
            math.sqrt(_CLAUDE_MAX_PIXELS / (width * height)),
        )
        return _scaled(width, height, scale)
    return width, height


def image_tokens(family: str, width: int, height: int) -> int:
    """Tokens ``family``'s provider counts for an image sent at ``width x height`` pixels
    (after its own resize; OpenAI families at high detail)."""
    _check(family, width, height)
    width, height = _provider_size(family, width, height)
    if family in _TILES:
        base, tile = _TILES[family]
        return base + tile * math.ceil(width / 512) * math.ceil(height / 512)
    if family == "openai-patch":
        patches = math.ceil(width / _PATCH_SIDE) * math.ceil(height / _PATCH_SIDE)
        return min(patches, _MAX_PATCHES)
    if family in _QWEN:
        factor = _QWEN[family][0]
        return (width // factor) * (height // factor)
    if family == "claude":
        return math.ceil(width * height / 750)
    if family == "gemini":
        if width <= _GEMINI_SMALL and height <= _GEMINI_SMALL:
            return _GEMINI_TOKENS
        return _GEMINI_TOKENS * math.ceil(width / _GEMINI_TILE) * math.ceil(height / _GEMINI_TILE)
    return math.ceil(width / _DEFAULT_PATCH) * math.ceil(height / _DEFAULT_PATCH)


def _effective_size(family: str, width: int, height: int) -> tuple[int, int]:
    """The largest size worth sending: the provider's resize, or the cap where none is published."""
    if family in ("gemini", "default"):
        return _scaled(width, height, _CAPPED_LONG_SIDE / max(width, height))
    return _provider_size(family, width, height)


def fit_size(
    family: str, width: int, height: int, budget_tokens: int | None = None
) -> tuple[int, int]:
    """The size to send a ``width x height`` image at to ``family``: never more pixels than the
    provider uses (aspect ratio kept, never upscaled), and with ``budget_tokens`` the largest
    such size costing at most that many tokens, its long side not below :data:`MIN_LONG_SIDE`
    (a budget under that size's cost yields that size)."""
    _check(family, width, height)
    if budget_tokens is not None and budget_tokens < 1:
        raise ValueError(f"budget_tokens must be positive, not {budget_tokens}")
    best = _effective_size(family, width, height)
    if budget_tokens is None or image_tokens(family, *best) <= budget_tokens:
        return best
    long_side = max(best)

    def at(side: int) -> tuple[int, int]:
        return _effective_size(family, *_scaled(best[0], best[1], side / long_side))

    low, high = min(MIN_LONG_SIDE, long_side), long_side  # tokens grow with the long side
    if image_tokens(family, *at(low)) > budget_tokens:
        return at(low)
    while high - low > 1:
        middle = (low + high) // 2
        if image_tokens(family, *at(middle)) <= budget_tokens:
            low = middle
        else:
            high = middle
    return at(low)


# -- the byte budget of one request ----------------------------------------------------------
@dataclass(frozen=True)
class Rung:
    """One way to send an image: a JPEG quality, and a scale of the sides the model's sizing
    chose (1.0: the family's effective resolution)."""

    quality: int
    scale: float


LADDER: tuple[Rung, ...] = (
    *(Rung(quality, 1.0) for quality in (70, 60, 50, 40, 30)),
    *(Rung(30, scale) for scale in (0.9, 0.8, 0.7, 0.6, 0.5)),
)
"""The rungs an image is stepped down, first to last (the floor): JPEG quality first, then
pixels, because quality costs less legibility. On 12 dense dev-set pages at gpt-4o's size,
Tesseract's word recall is 0.886 at quality 70 and 0.858 at quality 30 (59% of the bytes), but
0.798 at quality 70 with 0.8 of the pixels (65%); 30 at 0.9 reads 0.794, 30 at 0.8 0.737
(``benchmarks/image_legibility.py``; docs/backends.md, "Request bytes")."""

DEFAULT_MAX_IMAGE_BYTES = 900_000
"""Base64 bytes of a request's images by default: a 1 MB body with 100 KB left for the text (the
reader's default 24,000 characters of page text, the memories and the prompts)."""


def rung_scale(rung: Rung, long_side: int) -> float:
    """The scale ``rung`` applies to an image whose long side is ``long_side`` pixels: never up,
    and never below :data:`~llama_index_docmemo.llms.image_policy.MIN_LONG_SIDE` (a page's text
    would be lost), so an image already that small keeps its pixels."""
    if long_side <= MIN_LONG_SIDE:
        return 1.0
    return min(1.0, max(rung.scale, MIN_LONG_SIDE / long_side))


def spend(
    cost: Callable[[int, int], int], count: int, budget: int, rungs: int = len(LADDER)
) -> list[int | None]:
    """The rung of each of ``count`` images (in priority order, first the most important) so
    that their costs sum to at most ``budget``; None for an image left out.

    ``cost(image, rung)`` is the bytes of an image at a rung (asked lazily: each answer is an
    encoding). While over budget, the image costing most that is above the floor (``rungs - 1``)
    steps down one rung (ties: the lower priority first); once all are at the floor, the
    lowest-priority image is left out, until the rest fit.
    """
    if budget < 0 or rungs < 1:
        raise ValueError(f"a byte budget needs budget >= 0 and rungs >= 1, not {budget}, {rungs}")
    levels: list[int | None] = [0] * count
    costs = [cost(i, 0) for i in range(count)]
    kept = list(range(count))
    while kept and sum(costs[i] for i in kept) > budget:
        movable = [i for i in kept if (levels[i] or 0) < rungs - 1]
        if movable:
            image = max(movable, key=lambda i: (costs[i], i))
            level = (levels[image] or 0) + 1
            levels[image] = level
            costs[image] = cost(image, level)
        else:
            image = kept.pop()
            levels[image] = None
    return levels
