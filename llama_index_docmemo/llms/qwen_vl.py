"""QwenVL: a LlamaIndex chat LLM for a Qwen-VL model served by vLLM's OpenAI-compatible API.

Pages travel as PNG data URLs (long side capped) next to text; structured output goes through
a JSON schema. Retries are done here, in one bounded layer: the OpenAI client's own retries and
the tenacity layer of ``llama_index.llms.openai`` are switched off so that ``max_retries`` means
what it says and a dead server fails in seconds with an :class:`LLMError` naming the URL.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import random
import time
from collections.abc import Sequence
from typing import Any, Literal

import openai
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, ImageBlock
from llama_index.core.bridge.pydantic import Field
from llama_index.llms.openai.base import OpenAI
from llama_index.llms.openai_like import OpenAILike

from llama_index_docmemo.errors import LLMError

logger = logging.getLogger(__name__)

ENV_URL = "DOCMEMO_LLM_URL"
ENV_MODEL = "DOCMEMO_LLM_MODEL"
ENV_API_KEY = "DOCMEMO_LLM_API_KEY"
DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
MAX_IMAGE_SIDE = 1500

StructuredMode = Literal["response_format", "structured_outputs", "guided_json"]

# The undecorated request functions: the tenacity retry of llama_index.llms.openai would
# multiply our attempts (functools.wraps keeps the original under ``__wrapped__``).
_RAW_CHAT = getattr(OpenAI._chat, "__wrapped__", OpenAI._chat)
_RAW_ACHAT = getattr(OpenAI._achat, "__wrapped__", OpenAI._achat)

_RETRY_STATUS = frozenset({408, 409, 429})


def fit_image(image: Any, max_side: int = MAX_IMAGE_SIDE) -> Any:
    """``image`` (PIL) downscaled so its long side is at most ``max_side``, in RGB/L/RGBA mode."""
    if image.mode not in ("RGB", "L", "RGBA"):
        image = image.convert("RGB")
    width, height = image.size
    long_side = max(width, height)
    if long_side <= max_side:
        return image
    scale = max_side / long_side
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return image.resize(size)


def png_image_block(image: Any, max_side: int = MAX_IMAGE_SIDE) -> ImageBlock:
    """A chat image block holding ``image`` (PIL) as PNG, long side at most ``max_side``."""
    buf = io.BytesIO()
    fit_image(image, max_side).save(buf, format="PNG")
    return ImageBlock(image=buf.getvalue(), image_mimetype="image/png")


def retry_delay(
    attempt: int,
    retry_after: float | None,
    *,
    base: float,
    cap: float,
    jitter: float = 0.0,
) -> float | None:
    """Seconds to wait before retry number ``attempt + 1``; None when waiting is not worth it.

    A server's Retry-After is honoured when it is at most ``cap`` (longer means: give up now
    rather than hold a query for minutes); otherwise exponential backoff ``base * 2**attempt``
    capped at ``cap``, shortened by ``jitter`` (a fraction in [0, 1)) to spread clients out.
    """
    if retry_after is not None:
        return max(0.0, retry_after) if retry_after <= cap else None
    return min(cap, base * 2.0**attempt) * (1.0 - 0.25 * jitter)


def _retry_after(exc: Exception) -> float | None:
    """The server's Retry-After (seconds), from ``retry-after-ms`` or ``retry-after``."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue
    return None


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    return False


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not connect ({exc.__cause__ or exc})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {str(exc.message)[:500]}"
    return f"{type(exc).__name__}: {exc}"


class QwenVL(OpenAILike):
    """Qwen2.5-VL / Qwen3-VL behind a vLLM server (``vllm serve ... --port 8000``).

    Args:
        model: served model name; default ``$DOCMEMO_LLM_MODEL`` or Qwen/Qwen2.5-VL-7B-Instruct.
        api_base: server URL ending in ``/v1``; default ``$DOCMEMO_LLM_URL``.
        api_key: the server's ``--api-key``; default ``$DOCMEMO_LLM_API_KEY`` or "EMPTY".
        max_images_per_prompt: images allowed in one request; match the server's
            ``--limit-mm-per-prompt`` (a request with more is refused here, before sending).
        max_image_side: long side, in pixels, of every image sent (larger ones are downscaled).
        structured_mode: how :meth:`json_kwargs` asks for schema-constrained output:
            "response_format" (OpenAI ``json_schema``; vLLM decodes it with its structured
            outputs backend), "structured_outputs" (vLLM's own ``structured_outputs.json``
            field) or "guided_json" (the older vLLM field, removed in vLLM 0.12).
        timeout: seconds per HTTP attempt.
        max_retries: retries after the first attempt, on connection errors, timeouts,
            408/409/429 and 5xx; waits back off exponentially (honouring Retry-After).
        retry_backoff: first backoff wait in seconds.
        max_retry_wait: longest single wait; a Retry-After longer than this ends the retries.
    """

    max_images_per_prompt: int = Field(default=8, ge=1)
    max_image_side: int = Field(default=MAX_IMAGE_SIDE, ge=28)
    structured_mode: StructuredMode = Field(default="response_format")
    retry_backoff: float = Field(default=0.5, ge=0.0)
    max_retry_wait: float = Field(default=30.0, ge=0.0)

    def __init__(
        self,
        model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        *,
        context_window: int = 32768,
        max_tokens: int | None = 2048,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 2,
        **kwargs: Any,
    ) -> None:
        api_base = api_base or os.environ.get(ENV_URL)
        if not api_base:
            raise LLMError(
                f"QwenVL needs the URL of an OpenAI-compatible server: pass api_base= or set "
                f"{ENV_URL} (e.g. http://localhost:8000/v1)"
            )
        super().__init__(
            model=model or os.environ.get(ENV_MODEL) or DEFAULT_MODEL,
            api_base=api_base.rstrip("/"),
            api_key=api_key or os.environ.get(ENV_API_KEY) or "EMPTY",
            is_chat_model=True,
            is_function_calling_model=False,
            context_window=context_window,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
            max_retries=max_retries,
            **kwargs,
        )

    @classmethod
    def class_name(cls) -> str:
        return "QwenVL"

    # -- request shaping ----------------------------------------------------------------------
    def image_block(self, image: Any) -> ImageBlock:
        """``image`` (PIL) as a PNG block within this server's size limit."""
        return png_image_block(image, self.max_image_side)

    def json_kwargs(self, schema: dict[str, Any], name: str = "reply") -> dict[str, Any]:
        """Keyword arguments for :meth:`chat`/:meth:`achat` that constrain the reply to ``schema``."""
        if self.structured_mode == "structured_outputs":
            return {"extra_body": {"structured_outputs": {"json": schema}}}
        if self.structured_mode == "guided_json":
            return {"extra_body": {"guided_json": schema}}
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            }
        }

    def _prepare(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Check the image cap and bring every inline image to PNG within ``max_image_side``."""
        count = sum(isinstance(b, ImageBlock) for m in messages for b in m.blocks)
        if count > self.max_images_per_prompt:
            raise ValueError(
                f"{count} images in one request to {self.api_base}, more than "
                f"max_images_per_prompt={self.max_images_per_prompt} (the server's "
                f"--limit-mm-per-prompt); send fewer images or raise both limits"
            )
        if not count:
            return list(messages)
        out = []
        for message in messages:
            blocks = [
                self._normalise(b) if isinstance(b, ImageBlock) else b for b in message.blocks
            ]
            out.append(message.model_copy(update={"blocks": blocks}))
        return out

    def _normalise(self, block: ImageBlock) -> ImageBlock:
        if block.url is not None and str(block.url).startswith(("http://", "https://")):
            return block  # fetched by the server itself
        from PIL import Image

        with Image.open(block.resolve_image()) as image:
            if image.format == "PNG" and max(image.size) <= self.max_image_side:
                return block
            image.load()
            return self.image_block(image)

    # -- transport: one bounded retry layer ---------------------------------------------------
    def _get_credential_kwargs(self, is_async: bool = False) -> dict[str, Any]:
        kwargs = super()._get_credential_kwargs(is_async=is_async)
        kwargs["max_retries"] = 0  # retries happen in _chat/_achat
        return kwargs

    def _next_wait(self, exc: Exception, attempt: int) -> float:
        """Seconds to wait before the next attempt, or raise the final :class:`LLMError`."""
        wait = None
        asked = _retry_after(exc)
        if _retryable(exc) and attempt < self.max_retries:
            wait = retry_delay(
                attempt,
                asked,
                base=self.retry_backoff,
                cap=self.max_retry_wait,
                jitter=random.random(),
            )
        if wait is None:
            why = ""
            if asked is not None and asked > self.max_retry_wait:
                why = f" (it asked to retry after {asked:g}s, over max_retry_wait={self.max_retry_wait:g}s)"
            raise LLMError(
                f"LLM endpoint {self.api_base} (model {self.model}) {_describe(exc)} "
                f"after {attempt + 1} attempt(s){why}"
            ) from exc
        logger.warning(
            "LLM endpoint %s: %s; retrying in %.1fs", self.api_base, _describe(exc), wait
        )
        return wait

    def _chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        prepared = self._prepare(messages)
        attempt = 0
        while True:
            try:
                return _RAW_CHAT(self, prepared, **kwargs)
            except openai.OpenAIError as exc:
                time.sleep(self._next_wait(exc, attempt))
            attempt += 1

    async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        prepared = self._prepare(messages)
        attempt = 0
        while True:
            try:
                return await _RAW_ACHAT(self, prepared, **kwargs)
            except openai.OpenAIError as exc:
                await asyncio.sleep(self._next_wait(exc, attempt))
            attempt += 1
