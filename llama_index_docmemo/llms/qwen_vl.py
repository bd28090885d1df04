"""QwenVL: :class:`OpenAICompatible` with Qwen-VL's defaults (images on, vLLM's 32k window)."""

from __future__ import annotations

from typing import Any

from llama_index_docmemo.llms.openai_compatible import OpenAICompatible

DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"

__all__ = ["DEFAULT_MODEL", "QwenVL"]


class QwenVL(OpenAICompatible):
    """Qwen2.5-VL / Qwen3-VL behind a vLLM server (``vllm serve ... --port 8000``).

    The same arguments as :class:`OpenAICompatible`; the model defaults to
    ``$DOCMEMO_LLM_MODEL`` or Qwen/Qwen2.5-VL-7B-Instruct. Images are sent at multiples of 28
    px (what vLLM's ``smart_resize`` would make of them anyway, ``llms/image_policy.py``), each
    within ``tokens_per_image`` (2048, vLLM's ``max_pixels`` 2048·28·28 in docs/backends.md), which
    the window budget counts an image as; an engine's ``max_image_tokens`` makes them smaller.
    """

    def __init__(self, model: str | None = None, api_base: str | None = None, **kwargs: Any):
        super().__init__(model, api_base, default_model=DEFAULT_MODEL, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "QwenVL"
