"""A request's image bytes, spent across its images: lower JPEG quality and fewer pixels, the
largest image first, down to a floor; pure.

A request carries its images in base64 inside the JSON body, so a round of five dense pages and
three crops at gpt-4o's full resolution weighs 1.7 MB, while the path to a model often refuses
bodies over 1 MB (nginx's default ``client_max_body_size``, a common proxy in front of self-hosted
servers; LLM gateways and text-generation-inference have limits of their own) and every byte is
upload time. The providers' own ceilings are far above: OpenAI 50 MB of images a request (20 MB
an image), Anthropic 32 MB a request (5 MB an image), Gemini 20 MB of inline data. :func:`spend` decides, for images in priority order, which rung of :data:`LADDER`
each is sent at so that their sum fits a budget: it steps down the largest image one rung at a
time, and only when every image is at the floor leaves out the lowest-priority ones (their pages
still go as text).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llama_index_docmemo.llms.image_budget import MIN_LONG_SIDE


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
    and never below :data:`~llama_index_docmemo.llms.image_budget.MIN_LONG_SIDE` (a page's text
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
