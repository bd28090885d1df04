"""Page images as chat image blocks: PNG, long side capped (what vLLM and Qwen-VL expect)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from llama_index.core.base.llms.types import ImageBlock

if TYPE_CHECKING:
    from PIL.Image import Image

MAX_IMAGE_SIDE = 1500


def fit_image(image: Image, max_side: int = MAX_IMAGE_SIDE) -> Image:
    """``image`` downscaled so its long side is at most ``max_side``, in RGB/L/RGBA mode."""
    if image.mode not in ("RGB", "L", "RGBA"):
        image = image.convert("RGB")
    width, height = image.size
    long_side = max(width, height)
    if long_side <= max_side:
        return image
    scale = max_side / long_side
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return image.resize(size)


def png_image_block(image: Image, max_side: int = MAX_IMAGE_SIDE) -> ImageBlock:
    """A chat image block holding ``image`` as PNG, long side at most ``max_side``."""
    buf = io.BytesIO()
    fit_image(image, max_side).save(buf, format="PNG")
    return ImageBlock(image=buf.getvalue(), image_mimetype="image/png")
