"""QwenVL: :class:`OpenAICompatible` with Qwen-VL's defaults (images on, vLLM's 32k window)."""

from __future__ import annotations

from typing import Any

from llama_index_docmemo.llms.images import MAX_IMAGE_SIDE, fit_image, png_image_block
from llama_index_docmemo.llms.openai_compatible import OpenAICompatible

DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"

__all__ = ["DEFAULT_MODEL", "MAX_IMAGE_SIDE", "QwenVL", "fit_image", "png_image_block"]


class QwenVL(OpenAICompatible):
    """Qwen2.5-VL / Qwen3-VL behind a vLLM server (``vllm serve ... --port 8000``).

    The same arguments as :class:`OpenAICompatible`; the model defaults to
    ``$DOCMEMO_LLM_MODEL`` or Qwen/Qwen2.5-VL-7B-Instruct. With vLLM's defaults a page image
    costs up to 2048 tokens (``max_pixels`` 2048·28·28), which is ``tokens_per_image``.
    """

    def __init__(self, model: str | None = None, api_base: str | None = None, **kwargs: Any):
        super().__init__(model, api_base, default_model=DEFAULT_MODEL, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "QwenVL"
