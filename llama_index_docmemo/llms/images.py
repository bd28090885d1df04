"""Page images as chat image blocks: PNG, long side capped (what vLLM and Qwen-VL expect)."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from llama_index.core.base.llms.types import ImageBlock

if TYPE_CHECKING:
    from llama_index.core.llms import LLM
    from PIL.Image import Image

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

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


def max_side(llm: LLM) -> int:
    """The long side, in pixels, of images ``llm``'s server takes (``max_image_side``)."""
    value = getattr(llm, "max_image_side", None)
    return int(value) if isinstance(value, int) and value > 0 else MAX_IMAGE_SIDE


def image_block(llm: LLM, image: Image | Path) -> ImageBlock:
    """``image`` (a PIL image, or a PNG file) as an image block within ``llm``'s size limit. A
    file that fits is referenced by its path: its bytes are read only when the request is sent."""
    side = max_side(llm)
    if isinstance(image, Path):
        from PIL import Image as PILImage

        with PILImage.open(image) as opened:
            if opened.format == "PNG" and max(opened.size) <= side:
                return ImageBlock(path=image, image_mimetype="image/png")
            opened.load()
            return png_image_block(opened, side)
    return png_image_block(image, side)


def max_images(llm: LLM, default: int = 8) -> int:
    """Images the LLM's server takes in one request (``max_images_per_prompt`` when known)."""
    value = getattr(llm, "max_images_per_prompt", None)
    return int(value) if isinstance(value, int) and value > 0 else default


def load_blocks(llm: LLM, loaders: Mapping[K, Callable[[], Image | Path]]) -> dict[K, ImageBlock]:
    """Each image loaded (rendered) and converted for ``llm``; one that fails is left out with a
    warning (its page is still shown as text). Blocking: the async driver runs it off the loop."""
    blocks: dict[K, ImageBlock] = {}
    for key, load in loaders.items():
        try:
            blocks[key] = image_block(llm, load())
        except Exception as exc:  # a page MuPDF cannot render still has its text
            logger.warning("image of %s could not be loaded (%s); sending its text only", key, exc)
    return blocks
