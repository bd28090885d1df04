"""Page and crop images as chat image blocks, sized and encoded for the model that reads them.

The one place that decides an image's pixels and format: :class:`ImageSizing` takes the LLM's
model family (``llms/image_policy.py``: OpenAI's tiles, Qwen-VL's patches, Claude's and Gemini's
limits), an optional per-image token budget and the server's own long-side cap, and
:func:`encode_image` sends no more pixels than that model uses, as JPEG (every provider and
local server decodes it); PNG only for a server that asks (``OpenAICompatible(image_format=
"PNG")``). WebP was dropped on a first measurement (a fifth smaller than JPEG, a third fewer
words for Tesseract, which that run gave 0.75 of the pixels sent; not measured again), while JPEG
keeps PNG's word recall at a third its bytes (``benchmarks/image_legibility.py``).
:func:`load_blocks` encodes the images of one request within a byte budget
(``llms/image_policy.py``): lower quality, then fewer pixels, the largest image first.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from llama_index.core.base.llms.types import ChatMessage, ImageBlock

from llama_index_docmemo.llms.image_policy import (
    LADDER,
    Rung,
    fit_size,
    image_tokens,
    model_family,
    rung_scale,
    spend,
)
from llama_index_docmemo.llms.vision import model_name

if TYPE_CHECKING:
    from llama_index.core.llms import LLM
    from PIL.Image import Image

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

ImageFormat = Literal["JPEG", "PNG"]

MAX_IMAGE_SIDE = 1500
"""Long side of the page images rendered for readers (the largest any family uses, see
``image_policy``) and the default cap of :class:`~llama_index_docmemo.OpenAICompatible`."""


@dataclass(frozen=True)
class ImageSizing:
    """How images for one LLM are sized and encoded.

    Args:
        family: the model family (:func:`~llama_index_docmemo.llms.image_policy.model_family`).
        max_tokens: most tokens one image may cost (None: the family's effective resolution).
        max_side: the server's own long-side cap in pixels (None: none).
        image_format: "JPEG" (default) or "PNG".
    """

    family: str = "default"
    max_tokens: int | None = None
    max_side: int | None = None
    image_format: ImageFormat = "JPEG"

    def size(self, width: int, height: int) -> tuple[int, int]:
        """The pixels to send an image of ``width x height`` at (within ``max_side`` even where
        the family rounds sides up to its patch)."""
        if self.max_side is not None and max(width, height) > self.max_side:
            scale = self.max_side / max(width, height)
            width, height = max(1, round(width * scale)), max(1, round(height * scale))
        size = fit_size(self.family, width, height, self.max_tokens)
        while self.max_side is not None and max(size) > self.max_side:  # rounded up a patch
            scale = self.max_side / max(size)
            width, height = max(1, int(width * scale)), max(1, int(height * scale))
            size = fit_size(self.family, width, height, self.max_tokens)
        return size

    def tokens(self, width: int, height: int) -> int:
        """Estimated tokens of an image sent at ``width x height`` (the family's formula)."""
        return image_tokens(self.family, width, height)


PAGE_SIZE = (1159, 1500)
"""A letter page as the reader renders it (1500-px long side): the yardstick of a crop's cost."""


def crop_sizing(sizing: ImageSizing) -> ImageSizing:
    """``sizing`` for crops: a crop costs at most the tokens of a page image. A crop is rendered
    at 200 dpi, so a table's band of a page would otherwise cost more than the whole page (with
    gpt-4o 1105 tokens against 765): it keeps that page's detail per token, no more."""
    page = sizing.tokens(*sizing.size(*PAGE_SIZE))
    return replace(sizing, max_tokens=min(page, sizing.max_tokens or page))


def sizing_for(llm: LLM, max_tokens: int | None = None) -> ImageSizing:
    """The sizing of ``llm``'s images: its model's family, and its server's ``max_image_side``,
    ``image_format`` and ``tokens_per_image`` (what the context budget counts an image as, so
    no image costs more) where it has them (:class:`~llama_index_docmemo.OpenAICompatible`)."""
    side = getattr(llm, "max_image_side", None)
    fmt = getattr(llm, "image_format", None)
    counted = getattr(llm, "tokens_per_image", None)
    if isinstance(counted, int) and counted >= 64:
        max_tokens = min(counted, max_tokens or counted)
    return ImageSizing(
        family=model_family(model_name(llm)),
        max_tokens=max_tokens,
        max_side=side if isinstance(side, int) and side > 0 else None,
        image_format="PNG" if fmt == "PNG" else "JPEG",
    )


def encode_image(image: Image, sizing: ImageSizing) -> ImageBlock:
    """``image`` resized to ``sizing`` (never more pixels than the model uses) and encoded in
    its format; transparency is flattened onto white (scans have none worth keeping)."""
    return _encode(_flattened(image), sizing, LADDER[0])


def _flattened(image: Image) -> Image:
    """``image`` as RGB or grayscale, transparency flattened onto white."""
    from PIL import Image as PILImage

    if image.mode in ("RGBA", "LA", "P"):
        rgba = image.convert("RGBA")
        flat = PILImage.new("RGB", rgba.size, "white")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


def _encode(image: Image, sizing: ImageSizing, rung: Rung) -> ImageBlock:
    """``image`` (RGB or L) at :func:`_rung_size`, in ``sizing``'s format."""
    return _saved(_resized(image, _rung_size(image.size, sizing, rung)), sizing, rung)


def _rung_size(size: tuple[int, int], sizing: ImageSizing, rung: Rung) -> tuple[int, int]:
    """The pixels an image of ``size`` goes at on ``rung``: ``sizing``'s size times the rung's
    scale, sized again for the family (Qwen-VL's patches)."""
    sized = sizing.size(*size)
    scale = rung_scale(rung, max(sized))
    if scale >= 1:
        return sized
    return sizing.size(max(1, round(sized[0] * scale)), max(1, round(sized[1] * scale)))


def _resized(image: Image, size: tuple[int, int]) -> Image:
    from PIL import Image as PILImage

    return image if size == image.size else image.resize(size, PILImage.Resampling.LANCZOS)


def _saved(image: Image, sizing: ImageSizing, rung: Rung) -> ImageBlock:
    """``image`` encoded in ``sizing``'s format (JPEG at ``rung``'s quality)."""
    buffer = io.BytesIO()
    fmt = sizing.image_format
    image.save(buffer, format=fmt, **({"quality": rung.quality} if fmt == "JPEG" else {}))
    return ImageBlock(image=buffer.getvalue(), image_mimetype=f"image/{fmt.lower()}")


HEADER_CHARS = 8192
"""Base64 characters :func:`image_header` decodes first (6 KB; the markers of the JPEGs
:func:`encode_image` writes end within 1 KB)."""


def image_header(block: ImageBlock) -> tuple[str | None, tuple[int, int]]:
    """An inline image block's format and pixels, read from its header: only the first
    :data:`HEADER_CHARS` of its base64 are decoded, the whole only where the header runs past
    them (the size is asked for on every request, and decoding a page image whole takes
    milliseconds, holding the GIL). Raises PIL's error for bytes it cannot read."""
    from PIL import Image as PILImage

    data = block.image
    if isinstance(data, bytes) and len(data) > HEADER_CHARS:
        try:
            head = base64.b64decode(data[:HEADER_CHARS], validate=True)
            with PILImage.open(io.BytesIO(head)) as opened:
                return opened.format, opened.size
        except Exception:  # noqa: BLE001 - not base64, or a longer header: read it whole
            pass
    with PILImage.open(block.resolve_image()) as opened:
        return opened.format, opened.size


def block_size(block: ImageBlock) -> tuple[int, int] | None:
    """An image block's pixels (read from its header), or None when it cannot be read here
    (a remote URL, or bytes PIL does not know)."""
    if block.url is not None and str(block.url).startswith(("http://", "https://")):
        return None
    try:
        return image_header(block)[1]
    except Exception:  # an estimate is never worth failing a request
        return None


def request_image_tokens(messages: Sequence[ChatMessage], model: str) -> int:
    """Estimated image tokens of a request to ``model``: its family's formula over the sizes of
    the images it carries (images whose size cannot be read here count 0)."""
    family = model_family(model)
    sizes = [block_size(b) for m in messages for b in m.blocks if isinstance(b, ImageBlock)]
    return sum(image_tokens(family, *size) for size in sizes if size is not None)


def max_images(llm: LLM, default: int = 8) -> int:
    """Images the LLM's server takes in one request (``max_images_per_prompt`` when known)."""
    value = getattr(llm, "max_images_per_prompt", None)
    return int(value) if isinstance(value, int) and value > 0 else default


def load_blocks(
    images: Mapping[K, tuple[ImageSizing, Callable[[], Image | Path]]],
    max_bytes: int | None = None,
) -> dict[K, ImageBlock]:
    """The images of one request, each loaded (rendered) and encoded for its sizing; one that
    fails is left out with a warning (its page is still shown as text). ``images`` is in
    priority order; with ``max_bytes`` their base64 fits it (:func:`~llama_index_docmemo.llms.
    image_policy.spend`: lower quality, then fewer pixels, the largest first; past the floor the
    last images are left out). Blocking: the async driver runs it off the loop."""
    loaded: dict[K, tuple[ImageSizing, Image]] = {}
    for key, (sizing, load) in images.items():
        try:
            loaded[key] = (sizing, _flattened(_opened(load())))
        except Exception as exc:  # a page MuPDF cannot render still has its text
            logger.warning("image of %s could not be loaded (%s); sending its text only", key, exc)
    keys = list(loaded)
    encoded: dict[tuple[int, int], ImageBlock] = {}
    resized: dict[tuple[int, tuple[int, int]], Image] = {}  # rungs of one scale share a resize

    def block(index: int, rung: int) -> ImageBlock:
        if (index, rung) not in encoded:
            sizing, image = loaded[keys[index]]
            size = _rung_size(image.size, sizing, LADDER[rung])
            if (index, size) not in resized:
                resized[index, size] = _resized(image, size)
            encoded[index, rung] = _saved(resized[index, size], sizing, LADDER[rung])
        return encoded[index, rung]

    if max_bytes is None:
        levels: list[int | None] = [0] * len(keys)
    else:
        # an ImageBlock holds its image in base64: its length is what the body carries
        levels = spend(lambda i, r: len(block(i, r).image or b""), len(keys), max_bytes)
    left_out = [keys[i] for i, level in enumerate(levels) if level is None]
    if left_out:
        logger.warning(
            "images of %s left out: the request's images exceed %s bytes at the lowest quality",
            left_out,
            max_bytes,
        )
    return {keys[i]: block(i, level) for i, level in enumerate(levels) if level is not None}


def _opened(image: Image | Path) -> Image:
    """``image`` itself, or the image file read into memory."""
    if isinstance(image, Path):
        from PIL import Image as PILImage

        with PILImage.open(image) as opened:
            opened.load()
            return opened.copy()
    return image
