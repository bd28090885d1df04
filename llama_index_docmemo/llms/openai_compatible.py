"""A LlamaIndex chat LLM for any OpenAI-compatible server: vLLM, llama.cpp, Ollama, OpenAI.

What it adds to ``OpenAILike``:

- **structured output on every common server** (:meth:`OpenAICompatible.structured_chat`): the
  ``structured_mode`` setting, with "auto" falling back from ``json_schema`` to llama.cpp's
  ``json_object`` + schema to the schema in the prompt when a server refuses the form, and
  remembering per server what worked (``llms/structured.py``, ``llms/servers.py``);
- **a total deadline per request** (``request_deadline``, ``llms/deadline.py``) on top of the
  ``openai`` client's own per-read ``timeout`` and ``max_retries`` (connection errors, timeouts,
  408/409/429/5xx, exponential backoff, ``Retry-After``): the client's retries are the only
  retries; llama-index-llms-openai's tenacity layer is not involved because the request hooks
  ``_chat``/``_achat`` are implemented here;
- **the context window** (:meth:`OpenAICompatible.context_budget`): set, read from the server's
  model list (vLLM's ``max_model_len``) or learned from its overflow error;
- page images as PNG within ``max_image_side``, at most ``max_images_per_prompt`` per request,
  none at all when ``multimodal=False``;
- every failure an :class:`~llama_index_docmemo.errors.LLMError` naming the URL and model.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any

import httpx
import openai
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    ImageBlock,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.llms.openai.utils import from_openai_message, to_openai_message_dicts
from llama_index.llms.openai_like import OpenAILike

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms.context import ContextBudget, ContextWindowError, parse_overflow
from llama_index_docmemo.llms.deadline import (
    TOTAL_DEADLINE_PASSED,
    AsyncDeadlineTransport,
    DeadlineExceeded,
    DeadlineTransport,
    aiterate_with_deadline,
    await_with_deadline,
    call_with_deadline,
    deadline_at,
    header,
    iterate_with_deadline,
)
from llama_index_docmemo.llms.images import MAX_IMAGE_SIDE, png_image_block
from llama_index_docmemo.llms.servers import SERVERS
from llama_index_docmemo.llms.structured import (
    AUTO_ORDER,
    StructuredMode,
    names_response_format,
    next_mode,
    normalise_mode,
    request_options,
    with_schema_in_prompt,
)

logger = logging.getLogger(__name__)

ENV_URL = "DOCMEMO_LLM_URL"
ENV_MODEL = "DOCMEMO_LLM_MODEL"
ENV_API_KEY = "DOCMEMO_LLM_API_KEY"
ENV_STRUCTURED_MODE = "DOCMEMO_LLM_STRUCTURED_MODE"
ENV_CONTEXT_WINDOW = "DOCMEMO_LLM_CONTEXT_WINDOW"
ENV_MAX_TOKENS = "DOCMEMO_LLM_MAX_TOKENS"
ENV_DEADLINE = "DOCMEMO_LLM_DEADLINE"
ENV_TIMEOUT = "DOCMEMO_LLM_TIMEOUT"
ENV_IMAGES = "DOCMEMO_LLM_IMAGES"

DEFAULT_CONTEXT_WINDOW = 32768
_RETRIED_STATUS = frozenset({408, 409, 429})


def _env_number(name: str, kind: type[int] | type[float]) -> Any:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return kind(raw)
    except ValueError:
        raise LLMError(f"${name}={raw!r} is not a number") from None


def _env_flag(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    return raw.strip().lower() not in ("0", "false", "no", "off")


def _status(exc: BaseException | None) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def _error_text(exc: BaseException) -> str:
    """The server's error message, from the body when it has one."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            if message:
                return str(message)
        return str(exc.message)
    return str(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not connect ({exc.__cause__ or exc})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {' '.join(_error_text(exc).split())[:500]}"
    return f"{type(exc).__name__}: {exc}"


def _retried(exc: BaseException) -> bool:
    """Whether the ``openai`` client retries this failure (so it made several attempts)."""
    if isinstance(exc, openai.APIConnectionError):
        return True
    status = _status(exc)
    if status is None or names_response_format(status, _error_text(exc)):
        return False  # a refusal of the response format is marked not-to-retry (deadline.py)
    return status in _RETRIED_STATUS or status >= 500


def _usage(response: Any) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    return {
        "prompt_tokens": usage.prompt_tokens or 0,
        "completion_tokens": usage.completion_tokens or 0,
        "total_tokens": usage.total_tokens or 0,
    }


class OpenAICompatible(OpenAILike):
    """A chat model behind any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Every argument falls back to an environment variable, then a default.

    Args:
        model: served model name (``$DOCMEMO_LLM_MODEL``).
        api_base: server URL ending in ``/v1`` (``$DOCMEMO_LLM_URL``).
        api_key: the server's key (``$DOCMEMO_LLM_API_KEY``, else "EMPTY").
        structured_mode: "auto" (default, ``$DOCMEMO_LLM_STRUCTURED_MODE``), "json_schema",
            "structured_outputs" / "guided_json" (vLLM's fields), "json_object" (llama.cpp) or
            "prompt" (schema in the system turn; the caller repairs).
        context_window: tokens the model holds (``$DOCMEMO_LLM_CONTEXT_WINDOW``); unset: the
            server's own figure when its model list gives one, else 32768, corrected by the
            server's overflow error.
        max_tokens: reply tokens (``$DOCMEMO_LLM_MAX_TOKENS``, else 2048), kept free in the window.
        timeout: seconds per read/connect (the ``openai`` client's timeout;
            ``$DOCMEMO_LLM_TIMEOUT``, else 120).
        max_retries: the ``openai`` client's retries (connection errors, timeouts, 408, 409, 429,
            5xx; exponential backoff from 0.5 s, ``Retry-After`` honoured up to 2 minutes).
        request_deadline: total seconds for one request, retries and slow reads included
            (``$DOCMEMO_LLM_DEADLINE``, else 180); always on.
        multimodal: send images (``$DOCMEMO_LLM_IMAGES``, else True); False refuses them.
        max_images_per_prompt: images allowed in one request (vLLM's ``--limit-mm-per-prompt``).
        max_image_side: long side, in pixels, of every image sent (larger ones are downscaled).
        tokens_per_image: what one image costs in the context window, for the budget.
    """

    structured_mode: StructuredMode = Field(default="auto")
    request_deadline: float = Field(default=180.0, gt=0)
    multimodal: bool = Field(default=True)
    max_images_per_prompt: int = Field(default=8, ge=1)
    max_image_side: int = Field(default=MAX_IMAGE_SIDE, ge=28)
    tokens_per_image: int = Field(default=2048, ge=0)

    _window_is_set: bool = PrivateAttr(default=False)

    @field_validator("structured_mode", mode="before")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        return normalise_mode(value)

    def __init__(
        self,
        model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        *,
        structured_mode: str | None = None,
        context_window: int | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        timeout: float | None = None,
        max_retries: int = 2,
        request_deadline: float | None = None,
        multimodal: bool | None = None,
        default_model: str | None = None,
        **kwargs: Any,
    ) -> None:
        api_base = api_base or os.environ.get(ENV_URL)
        if not api_base:
            raise LLMError(
                f"{type(self).__name__} needs the URL of an OpenAI-compatible server: pass "
                f"api_base= or set {ENV_URL} (e.g. http://127.0.0.1:8000/v1)"
            )
        model = model or os.environ.get(ENV_MODEL) or default_model
        if not model:
            raise LLMError(f"no model name for {api_base}: pass model= or set {ENV_MODEL}")
        window = context_window or _env_number(ENV_CONTEXT_WINDOW, int)
        images = _env_flag(ENV_IMAGES) if multimodal is None else multimodal
        super().__init__(
            model=model,
            api_base=api_base.rstrip("/"),
            api_key=api_key or os.environ.get(ENV_API_KEY) or "EMPTY",
            is_chat_model=True,
            is_function_calling_model=False,
            context_window=window or DEFAULT_CONTEXT_WINDOW,
            max_tokens=max_tokens or _env_number(ENV_MAX_TOKENS, int) or 2048,
            temperature=temperature,
            timeout=timeout or _env_number(ENV_TIMEOUT, float) or 120.0,
            max_retries=max_retries,
            structured_mode=structured_mode or os.environ.get(ENV_STRUCTURED_MODE) or "auto",
            request_deadline=request_deadline or _env_number(ENV_DEADLINE, float) or 180.0,
            multimodal=True if images is None else images,
            http_client=openai.DefaultHttpxClient(transport=DeadlineTransport()),
            async_http_client=openai.DefaultAsyncHttpxClient(transport=AsyncDeadlineTransport()),
            **kwargs,
        )
        self._window_is_set = window is not None

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a Ray worker summarising pages): HTTP clients do not pickle, make new ones."""
        super().__setstate__(state)
        self._client = self._aclient = None
        self._http_client = openai.DefaultHttpxClient(transport=DeadlineTransport())
        self._async_http_client = openai.DefaultAsyncHttpxClient(transport=AsyncDeadlineTransport())

    @classmethod
    def class_name(cls) -> str:
        return "OpenAICompatible"

    # -- request shaping ----------------------------------------------------------------------
    def image_block(self, image: Any) -> ImageBlock:
        """``image`` (PIL) as a PNG block within this server's size limit."""
        return png_image_block(image, self.max_image_side)

    def _prepare(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Check the image cap and bring every inline image to PNG within ``max_image_side``."""
        count = sum(isinstance(b, ImageBlock) for m in messages for b in m.blocks)
        if count and not self.multimodal:
            raise ValueError(
                f"{count} image(s) in a request to {self.api_base} (model {self.model}), which is "
                f"configured text-only (multimodal=False / {ENV_IMAGES}=0): send page text only"
            )
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

    # -- context window -------------------------------------------------------------------------
    def context_budget(self) -> ContextBudget:
        """The window, reply reserve and ratios a prompt to this server must respect.

        The window is the setting when given, else what the server reported (its model list
        or an overflow error), else 32768; the characters-per-token ratio tightens after an
        overflow error. Reads the model list once per server (a short request).
        """
        facts = SERVERS.get(self.api_base)
        if not self._window_is_set and not facts.models_checked:
            facts = SERVERS.update(
                self.api_base,
                models_checked=True,
                context_window=facts.context_window or self._served_window(),
            )
        window = self.context_window
        if facts.context_window and (not self._window_is_set or facts.context_window < window):
            window = facts.context_window
        budget = ContextBudget(
            window=window,
            reply_tokens=self.max_tokens or 0,
            tokens_per_image=self.tokens_per_image if self.multimodal else 0,
        )
        if facts.chars_per_token:
            budget = dataclasses.replace(budget, chars_per_token=facts.chars_per_token)
        return budget

    def _served_window(self) -> int | None:
        """The model's context length from ``GET /models`` (vLLM: ``max_model_len``)."""
        try:
            client = self._get_client().with_options(timeout=10.0, max_retries=0)
            models = client.models.list()
        except openai.OpenAIError as exc:
            logger.info("%s: model list not readable (%s)", self.api_base, _describe(exc))
            return None
        for entry in models.data:
            if entry.id != self.model:
                continue
            extra = entry.model_extra or {}
            for key in ("max_model_len", "context_length", "context_window", "n_ctx"):
                value = extra.get(key) or (extra.get("meta") or {}).get(key)
                if isinstance(value, int) and value > 0:
                    return value
        return None

    # -- errors -------------------------------------------------------------------------------
    def _failure(self, exc: BaseException) -> LLMError:
        """The :class:`LLMError` for a failed request (context overflows are learned)."""
        where = f"LLM endpoint {self.api_base} (model {self.model})"
        if isinstance(exc, DeadlineExceeded) or TOTAL_DEADLINE_PASSED in str(exc):
            return LLMError(
                f"{where} did not answer within the total request deadline of "
                f"{self.request_deadline:g}s (request_deadline / {ENV_DEADLINE})"
            )
        if isinstance(exc, openai.APIStatusError):
            overflow = parse_overflow(_error_text(exc), self.max_tokens or 0)
            if overflow is not None:
                window, prompt_tokens = overflow
                SERVERS.update(self.api_base, context_window=window)
                return ContextWindowError(
                    f"{where}: the prompt ({prompt_tokens} tokens) does not fit the context "
                    f"window of {window} tokens with {self.max_tokens} kept for the reply",
                    window=window,
                    prompt_tokens=prompt_tokens,
                )
        retried = f"(retried up to {self.max_retries} times)" if _retried(exc) else "(not retried)"
        return LLMError(f"{where} {_describe(exc)} {retried}")

    # -- transport: the openai client's retries, one total deadline ----------------------------
    @staticmethod
    def _headers(kwargs: dict[str, Any], at: float | None) -> dict[str, Any]:
        """``kwargs`` with the deadline header added (for :class:`DeadlineTransport`)."""
        return {**kwargs, "extra_headers": {**(kwargs.get("extra_headers") or {}), **header(at)}}

    def _response(self, response: Any) -> ChatResponse:
        choice = response.choices[0]
        return ChatResponse(
            message=from_openai_message(choice.message, modalities=["text"]),
            raw=response,
            additional_kwargs=_usage(response),
        )

    def _chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        dicts = to_openai_message_dicts(self._prepare(messages), model=self.model)
        at = deadline_at(self.request_deadline)

        def send() -> Any:
            return self._get_client().chat.completions.create(
                messages=dicts, stream=False, **self._get_model_kwargs(**self._headers(kwargs, at))
            )

        try:
            return self._response(call_with_deadline(send, at))
        except (openai.OpenAIError, DeadlineExceeded) as exc:
            raise self._failure(exc) from exc

    async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        dicts = to_openai_message_dicts(self._prepare(messages), model=self.model)
        at = deadline_at(self.request_deadline)
        request = self._get_aclient().chat.completions.create(
            messages=dicts, stream=False, **self._get_model_kwargs(**self._headers(kwargs, at))
        )
        try:
            return self._response(await await_with_deadline(request, at))
        except (openai.OpenAIError, DeadlineExceeded) as exc:
            raise self._failure(exc) from exc

    def _stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        # the parent builds the stream lazily (its retry decorator wraps only that building, so
        # the openai client's retries stay the only ones); the deadline bounds every chunk
        at = deadline_at(self.request_deadline)
        chunks = super()._stream_chat(self._prepare(messages), **self._headers(kwargs, at))

        def guarded() -> ChatResponseGen:
            try:
                yield from iterate_with_deadline(chunks, at)
            except (openai.OpenAIError, httpx.HTTPError, DeadlineExceeded) as exc:
                raise self._failure(exc) from exc

        return guarded()

    async def _astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        at = deadline_at(self.request_deadline)
        chunks = await super()._astream_chat(self._prepare(messages), **self._headers(kwargs, at))

        async def guarded() -> ChatResponseAsyncGen:
            try:
                async for chunk in aiterate_with_deadline(chunks, at):
                    yield chunk
            except (openai.OpenAIError, httpx.HTTPError, DeadlineExceeded) as exc:
                raise self._failure(exc) from exc

        return guarded()

    # -- structured output ----------------------------------------------------------------------
    def structured_mode_now(self) -> str:
        """The concrete mode the next structured request uses."""
        if self.structured_mode != "auto":
            return self.structured_mode
        return SERVERS.get(self.api_base).structured_mode or AUTO_ORDER[0]

    def _structured(
        self, messages: Sequence[ChatMessage], schema: dict[str, Any], mode: str, name: str
    ) -> tuple[list[ChatMessage], dict[str, Any]]:
        if mode == "prompt":
            return with_schema_in_prompt(messages, schema), {}
        return list(messages), request_options(mode, schema, name)

    def _fallback(self, exc: LLMError, mode: str) -> str | None:
        """The next mode when "auto" was refused in ``mode``; None to re-raise ``exc``."""
        cause = exc.__cause__
        if self.structured_mode != "auto" or cause is None:
            return None
        if not names_response_format(_status(cause), _error_text(cause)):
            return None
        following = next_mode(mode)
        if following is not None:
            # remembered now, not on success: a slow first answer must not send others back
            # to the refused form
            SERVERS.update(self.api_base, structured_mode=following)
            logger.warning(
                "%s refused structured mode %r (%s); trying %r",
                self.api_base,
                mode,
                _describe(cause),
                following,
            )
        return following

    def _worked(self, mode: str) -> None:
        if self.structured_mode == "auto":
            SERVERS.update(self.api_base, structured_mode=mode)

    def structured_chat(
        self, messages: Sequence[ChatMessage], schema: dict[str, Any], name: str = "reply"
    ) -> ChatResponse:
        """:meth:`chat` asking for JSON that follows ``schema``, in the server's own form."""
        mode = self.structured_mode_now()
        while True:
            request, options = self._structured(messages, schema, mode, name)
            try:
                response = self.chat(request, **options)
            except LLMError as exc:
                following = self._fallback(exc, mode)
                if following is None:
                    raise
                mode = following
                continue
            self._worked(mode)
            return response

    async def astructured_chat(
        self, messages: Sequence[ChatMessage], schema: dict[str, Any], name: str = "reply"
    ) -> ChatResponse:
        """Async :meth:`structured_chat`."""
        mode = self.structured_mode_now()
        while True:
            request, options = self._structured(messages, schema, mode, name)
            try:
                response = await self.achat(request, **options)
            except LLMError as exc:
                following = self._fallback(exc, mode)
                if following is None:
                    raise
                mode = following
                continue
            self._worked(mode)
            return response
