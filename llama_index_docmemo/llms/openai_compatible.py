"""A LlamaIndex chat LLM for any OpenAI-compatible server: vLLM, llama.cpp, Ollama, OpenAI.

Written on LlamaIndex's public :class:`~llama_index.core.llms.LLM` interface and the ``openai``
SDK's public clients (``AsyncOpenAI`` on the async path, ``OpenAI`` on the sync one), with no
class or private hook of llama-index-llms-openai (only its public message converters, so the
request bytes are those LlamaIndex's ``OpenAI`` sends). What it adds:

- **structured output on every common server**, behind LlamaIndex's own interface
  (``structured_predict`` / ``astructured_predict``, so any LlamaIndex code gets it): the
  ``structured_mode`` setting, with "auto" falling back from ``json_schema`` to llama.cpp's
  ``json_object`` + schema to the schema in the prompt when a server refuses the form, and
  remembering per server what worked in its ``server_memory`` (the forms: ``llms/structured.py``;
  the memory: ``llms/servers.py``);
- **a total deadline per request** (``request_deadline``, ``llms/wire.py``: each attempt's
  ``httpx`` timeouts cut to the time left, ``asyncio`` cancellation on the async path) on top of
  the client's per-read ``httpx.Timeout`` and its bounded ``max_retries`` (connection errors,
  timeouts, 408/409/429/5xx, exponential backoff, ``Retry-After``): the client's retries are the
  only retries;
- **the context window** (:meth:`OpenAICompatible.context_budget`): set, read from the server's
  model list (vLLM's ``max_model_len``) or learned from its overflow error;
- page images sized for the model (``llms/images.py``) within ``max_image_side``, at most
  ``max_images_per_prompt`` per request,
  none at all when ``multimodal=False``;
- every failure, and every reply without an answer, an
  :class:`~llama_index_docmemo.errors.LLMError` naming the URL and model (:func:`chat_response`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

import httpx
import openai
from llama_index.core.base.llms.generic_utils import (
    achat_to_completion_decorator,
    astream_chat_to_completion_decorator,
    chat_to_completion_decorator,
    stream_chat_to_completion_decorator,
)
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    ImageBlock,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr, field_validator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.llm import (
    LLMStructuredPredictEndEvent,
    LLMStructuredPredictStartEvent,
)
from llama_index.core.llms import LLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts import BasePromptTemplate
from llama_index.llms.openai.utils import to_openai_message_dicts

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms.context import ContextBudget, ContextWindowError
from llama_index_docmemo.llms.environment import ENV_IMAGES, ENV_MODEL, ENV_URL, llm_environment
from llama_index_docmemo.llms.images import (
    MAX_IMAGE_SIDE,
    ImageFormat,
    encode_image,
    image_header,
    sizing_for,
)
from llama_index_docmemo.llms.servers import ServerMemory, server_key
from llama_index_docmemo.llms.structured import (
    AUTO_ORDER,
    StructuredMode,
    ask_with_schema_in_prompt,
    next_mode,
    normalise_mode,
    reply_schema,
    request_options,
    validate_reply,
)
from llama_index_docmemo.llms.wire import (
    READ_ERRORS,
    AsyncDeadlineTransport,
    DeadlineExceeded,
    DeadlineTransport,
    aiterate_with_deadline,
    await_with_deadline,
    chat_response,
    deadline_at,
    describe,
    iterate_with_deadline,
    llm_failure,
    malformed,
    refuses_form_of,
    send,
    sending_until,
    unreadable,
    wire_request,
)
from llama_index_docmemo.step_runtime import Steps, arun, either, run, to_thread

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

M = TypeVar("M", bound=BaseModel)

DEFAULT_CONTEXT_WINDOW = 32768
_MAKING_CLIENT = threading.Lock()
_EMPTY_STREAM = "a stream without a single chunk (a body that is not server-sent events?)"


def _stream_responses(chunks: Any) -> ChatResponseGen:
    """A generator of cumulative :class:`ChatResponse`s from the stream's chunks (sync)."""
    content = ""
    for chunk in chunks:
        response, content = _delta_response(chunk, content)
        if response is not None:
            yield response


async def _astream_responses(chunks: Any) -> ChatResponseAsyncGen:
    """Async :func:`_stream_responses`."""
    content = ""
    async for chunk in chunks:
        response, content = _delta_response(chunk, content)
        if response is not None:
            yield response


def _delta_response(chunk: Any, content: str) -> tuple[ChatResponse | None, str]:
    """One streamed chunk as (the answer so far, its text); None for a chunk without a delta."""
    delta = chunk.choices[0].delta if chunk.choices else None
    if delta is None:
        return None, content
    piece = delta.content or ""
    content += piece
    message = ChatMessage(role=delta.role or MessageRole.ASSISTANT, content=content)
    return ChatResponse(message=message, delta=piece, raw=chunk), content


class OpenAICompatible(LLM):
    """A chat model behind any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Every argument falls back to an environment variable, then a default.

    Args:
        model: served model name (``$DOCMEMO_LLM_MODEL``).
        api_base: server URL ending in ``/v1`` (``$DOCMEMO_LLM_URL``).
        api_key: the server's key (``$DOCMEMO_LLM_API_KEY``, else "EMPTY").
        structured_mode: "auto" (default, ``$DOCMEMO_LLM_STRUCTURED_MODE``), "json_schema",
            "structured_outputs" / "guided_json" (vLLM's fields), "json_object" (llama.cpp) or
            "prompt" (schema in the system turn, one repair request).
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
        image_format: "JPEG" or "PNG" for every image sent (None: JPEG from this package, any
            image a caller built kept as it is within ``max_image_side``).
        tokens_per_image: what one image costs in the context window, for the budget.
        server_memory: what the server taught (the structured form it accepts, its window, a
            refusal of images), consulted by this LLM and its readers; default a memory of its
            own. Pass one :class:`~llama_index_docmemo.llms.servers.ServerMemory` to several LLMs
            to share it.
    """

    model: str = Field(description="The served model name.")
    api_base: str = Field(description="The server's URL, ending in /v1.")
    api_key: str = Field(default="EMPTY", exclude=True)
    temperature: float = Field(default=0.0, ge=0.0)
    max_tokens: int | None = Field(default=2048, gt=0)
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, gt=0)
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    default_headers: dict[str, str] | None = Field(default=None)
    additional_kwargs: dict[str, Any] = Field(default_factory=dict)
    structured_mode: StructuredMode = Field(default="auto")
    request_deadline: float = Field(default=180.0, gt=0)
    multimodal: bool = Field(default=True)
    max_images_per_prompt: int = Field(default=8, ge=1)
    max_image_side: int = Field(default=MAX_IMAGE_SIDE, ge=28)
    image_format: ImageFormat | None = Field(default=None)
    tokens_per_image: int = Field(default=2048, ge=0)
    server_memory: ServerMemory = Field(default_factory=ServerMemory, exclude=True)

    _window_is_set: bool = PrivateAttr(default=False)
    _sync: openai.OpenAI | None = PrivateAttr(default=None)
    _aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
        PrivateAttr(default_factory=weakref.WeakKeyDictionary)
    )

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
        server_memory: ServerMemory | None = None,
        default_model: str | None = None,
        **kwargs: Any,
    ) -> None:
        env = llm_environment()
        api_base = api_base or env.url
        if not api_base:
            raise LLMError(
                f"{type(self).__name__} needs the URL of an OpenAI-compatible server: pass "
                f"api_base= or set {ENV_URL} (e.g. http://127.0.0.1:8000/v1)"
            )
        model = model or env.model or default_model
        if not model:
            raise LLMError(f"no model name for {api_base}: pass model= or set {ENV_MODEL}")
        window = context_window or env.context_window
        images = env.images if multimodal is None else multimodal
        super().__init__(
            model=model,
            api_base=api_base.rstrip("/"),
            api_key=api_key or env.api_key or "EMPTY",
            context_window=window or DEFAULT_CONTEXT_WINDOW,
            max_tokens=max_tokens or env.max_tokens or 2048,
            temperature=temperature,
            timeout=timeout or env.timeout or 120.0,
            max_retries=max_retries,
            structured_mode=structured_mode or env.structured_mode or "auto",
            request_deadline=request_deadline or env.deadline or 180.0,
            multimodal=True if images is None else images,
            server_memory=server_memory if server_memory is not None else ServerMemory(),
            **kwargs,
        )
        self._window_is_set = window is not None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Ray worker summarising pages): HTTP clients do not pickle, so none go (and
        LlamaIndex's trial pickling of every attribute is skipped)."""
        state = BaseModel.__getstate__(self)
        private = {**(state.get("__pydantic_private__") or {}), "_sync": None, "_aclients": None}
        return {**state, "__pydantic_private__": private}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._aclients = weakref.WeakKeyDictionary()

    @classmethod
    def class_name(cls) -> str:
        return "OpenAICompatible"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens or -1,
            is_chat_model=True,
            is_function_calling_model=False,
            model_name=self.model,
        )

    # -- clients: the openai SDK's, one total deadline in their transport ---------------------
    def _client_options(self) -> dict[str, Any]:
        return {
            "api_key": self.api_key,
            "base_url": self.api_base,
            "max_retries": self.max_retries,
            "timeout": httpx.Timeout(self.timeout),
            "default_headers": self.default_headers,
        }

    def _sync_client(self) -> openai.OpenAI:
        """The sync client (made once)."""
        if self._sync is None:
            http = openai.DefaultHttpxClient(transport=DeadlineTransport())
            self._sync = openai.OpenAI(**self._client_options(), http_client=http)
        return self._sync

    def _new_aclient(self) -> openai.AsyncOpenAI:
        """A new async client with the deadline transport (no loop of its own yet)."""
        http = openai.DefaultAsyncHttpxClient(transport=AsyncDeadlineTransport())
        return openai.AsyncOpenAI(**self._client_options(), http_client=http)

    async def _loop_client(self) -> openai.AsyncOpenAI:
        """The async client of the running event loop: an ``httpx`` pool's connections belong
        to the loop that opened them, so a client kept from an earlier ``asyncio.run`` fails
        with "Event loop is closed"; each loop's client goes with its loop. Made in a worker
        thread the first time: an ``httpx`` client loads the CA certificates as it is made
        (some 55 ms of CPU, which the loop's first request would otherwise wait on)."""
        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            client = await to_thread(self._aclient_of, loop)
        return client

    def _aclient_of(self, loop: asyncio.AbstractEventLoop) -> openai.AsyncOpenAI:
        """``loop``'s client, made now if it has none (blocking): one at a time, so the first
        requests of many concurrent queries make one client (32 made 31 more, 70 ms of CPU
        each, thrown away)."""
        with _MAKING_CLIENT:
            client = self._aclients.get(loop)
            if client is None:
                client = self._aclients[loop] = self._new_aclient()
            return client

    # -- request shaping ----------------------------------------------------------------------
    def _prepare(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Check the image cap and bring every inline image within ``max_image_side`` (in
        ``image_format`` when set)."""
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

        fmt, size = image_header(block)
        wanted = (self.image_format,) if self.image_format else ("PNG", "JPEG")
        if fmt in wanted and max(size) <= self.max_image_side:
            return block
        with Image.open(block.resolve_image()) as image:
            image.load()
            return encode_image(image, sizing_for(self))

    # -- context window -------------------------------------------------------------------------
    def context_budget(self) -> ContextBudget:
        """The window, reply reserve and ratios a prompt to this server must respect.

        The window is the setting when given, else what the server reported (its model list
        or an overflow error), else 32768; the characters-per-token ratio tightens after an
        overflow error. Reads the model list once per server (a short request).
        """
        facts = self.server_memory.get(self.server)
        if not self._window_is_set and not facts.models_checked:
            facts = self.server_memory.update(
                self.server,
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
            client = self._sync_client().with_options(timeout=10.0, max_retries=0)
            models = client.models.list()
        except openai.OpenAIError as exc:
            logger.info("%s: model list not readable (%s)", self.api_base, describe(exc))
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
        """The :class:`LLMError` for a failed request (an overflow teaches the window)."""
        failure = llm_failure(
            exc,
            where=self._where,
            deadline=self.request_deadline,
            max_retries=self.max_retries,
            reply_tokens=self.max_tokens or 0,
        )
        if isinstance(failure, ContextWindowError) and failure.window:
            self.server_memory.update(self.server, context_window=failure.window)
        return failure

    # -- requests: the client's retries, one total deadline ------------------------------------
    @property
    def _where(self) -> str:
        return f"LLM endpoint {self.api_base} (model {self.model})"

    def _request(self, messages: Sequence[ChatMessage], **kwargs: Any) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments: LlamaIndex's ``OpenAI`` request shape
        (model, temperature, max_tokens, the caller's options, ``additional_kwargs``)."""
        options: dict[str, Any] = {"model": self.model, "temperature": self.temperature, **kwargs}
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        return {"messages": self._message_dicts(messages), **options, **self.additional_kwargs}

    def _message_dicts(self, messages: Sequence[ChatMessage]) -> list[Any]:
        """The request's messages as the ``openai`` client sends them (images as base64 data)."""
        return to_openai_message_dicts(self._prepare(messages), model=self.model)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """The ``openai`` sync client in the caller's thread; its transport ends each attempt by
        the deadline (no thread of ours)."""
        request = self._request(messages, stream=False, **kwargs)
        try:
            with sending_until(deadline_at(self.request_deadline)):
                reply = self._sync_client().chat.completions.create(**request)
        except openai.OpenAIError as exc:
            raise self._failure(exc) from exc
        except READ_ERRORS as exc:  # the client could not read the body
            raise unreadable(self._where, exc) from exc
        return chat_response(reply, self._where)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """The ``openai`` async client, cancelled at the deadline. Bringing page images
        within ``max_image_side`` and into base64 is tens of milliseconds of CPU a request, and
        its JSON body some more (:func:`~llama_index_docmemo.llms.wire.wire_request`): both run
        off the event loop."""
        request = await to_thread(self._request, messages, stream=False, **kwargs)
        client = await self._loop_client()
        wire = await to_thread(wire_request, request)
        at = deadline_at(self.request_deadline)
        try:
            with sending_until(at):
                reply = await await_with_deadline(send(client, wire), at)
        except (openai.OpenAIError, DeadlineExceeded) as exc:
            raise self._failure(exc) from exc
        except READ_ERRORS as exc:  # the client could not read the body
            raise unreadable(self._where, exc) from exc
        return chat_response(reply, self._where)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """The answer as it comes (sent on the first ``next``); the deadline bounds every chunk."""
        request = self._request(messages, stream=True, **kwargs)
        at = deadline_at(self.request_deadline)

        def guarded() -> ChatResponseGen:
            received = 0
            try:
                with sending_until(at):
                    chunks = self._sync_client().chat.completions.create(**request)
                for response in iterate_with_deadline(_stream_responses(chunks), at):
                    received += 1
                    yield response
            except (openai.OpenAIError, httpx.HTTPError, DeadlineExceeded) as exc:
                raise self._failure(exc) from exc
            except READ_ERRORS as exc:  # a chunk the client or LlamaIndex could not read
                raise unreadable(self._where, exc) from exc
            if not received:
                raise malformed(self._where, _EMPTY_STREAM)

        return guarded()

    @llm_chat_callback()
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        request = await to_thread(self._request, messages, stream=True, **kwargs)
        client = await self._loop_client()
        wire = await to_thread(wire_request, request)  # the JSON body off the loop too
        at = deadline_at(self.request_deadline)

        async def guarded() -> ChatResponseAsyncGen:
            received = 0
            try:
                with sending_until(at):
                    chunks = await await_with_deadline(send(client, wire), at)
                async for response in aiterate_with_deadline(_astream_responses(chunks), at):
                    received += 1
                    yield response
            except (openai.OpenAIError, httpx.HTTPError, DeadlineExceeded) as exc:
                raise self._failure(exc) from exc
            except READ_ERRORS as exc:  # a chunk the client or LlamaIndex could not read
                raise unreadable(self._where, exc) from exc
            if not received:
                raise malformed(self._where, _EMPTY_STREAM)

        return guarded()

    # -- structured output: the server's form, in FALLBACKS order, remembered per server -------
    @property
    def server(self) -> str:
        """This client's key in its server memory (base URL and model)."""
        return server_key(self) or self.api_base

    def structured_mode_now(self) -> str:
        """The concrete mode the next structured request uses."""
        if self.structured_mode != "auto":
            return self.structured_mode
        return self.server_memory.get(self.server).structured_mode or AUTO_ORDER[0]

    def _fallback(self, exc: LLMError, mode: str) -> str | None:
        """The next mode when "auto" was refused in ``mode``; None to re-raise ``exc``."""
        cause = exc.__cause__
        if self.structured_mode != "auto" or cause is None:
            return None
        if not refuses_form_of(cause):
            return None
        following = next_mode(mode)
        if following is not None:
            # remembered now, not on success: a slow first answer must not send others back
            # to the refused form
            self.server_memory.update(self.server, structured_mode=following)
            logger.warning(
                "%s refused structured mode %r (%s); trying %r",
                self.api_base,
                mode,
                describe(cause),
                following,
            )
        return following

    def _predict(
        self, output_cls: type[M], messages: list[ChatMessage], llm_kwargs: dict[str, Any]
    ) -> Steps[M]:
        """Steps of a structured request: the server's form in "auto" order (json_schema, then
        llama.cpp's json_object + schema, then the schema in the prompt with one repair)."""
        mode = self.structured_mode_now()
        while True:
            if mode == "prompt":
                reply = yield from ask_with_schema_in_prompt(
                    self,  # type: ignore[arg-type]
                    messages,
                    output_cls,
                    **llm_kwargs,
                )
                if reply is None:
                    raise ValueError(
                        f"{self.api_base} (model {self.model}): the reply is not a valid "
                        f"{output_cls.__name__}, even after a repair request"
                    )
                break
            options = request_options(mode, reply_schema(output_cls), output_cls.__name__)
            try:
                response = yield either(self.chat, self.achat, messages, **llm_kwargs, **options)
            except LLMError as exc:
                following = self._fallback(exc, mode)
                if following is None:
                    raise
                mode = following
                continue
            reply = validate_reply(output_cls, response.message.content or "")
            break
        if self.structured_mode == "auto":
            self.server_memory.update(self.server, structured_mode=mode)
        return reply

    @dispatcher.span
    def structured_predict(
        self,
        output_cls: type[M],
        prompt: BasePromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> M:
        """A ``output_cls`` reply, asked for in the form this server accepts (see
        ``structured_mode``); raises ``ValueError`` for a reply that does not validate."""
        dispatcher.event(
            LLMStructuredPredictStartEvent(
                output_cls=output_cls, template=prompt, template_args=prompt_args
            )
        )
        messages = prompt.format_messages(**prompt_args)
        reply = run(self._predict(output_cls, messages, dict(llm_kwargs or {})))
        dispatcher.event(LLMStructuredPredictEndEvent(output=reply))
        return reply

    @dispatcher.span
    async def astructured_predict(
        self,
        output_cls: type[M],
        prompt: BasePromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> M:
        """Async :meth:`structured_predict`. The prompt is formatted off the event loop:
        LlamaIndex validates every image block again as it formats (base64 decoded and encoded
        twice over), 16 ms a reading request and up to 60 ms with crops (8 concurrent
        ``aquery`` calls, ``integration_tests/test_async_nonblocking.py``)."""
        dispatcher.event(
            LLMStructuredPredictStartEvent(
                output_cls=output_cls, template=prompt, template_args=prompt_args
            )
        )
        messages = await to_thread(prompt.format_messages, **prompt_args)
        reply = await arun(self._predict(output_cls, messages, dict(llm_kwargs or {})))
        dispatcher.event(LLMStructuredPredictEndEvent(output=reply))
        return reply

    # -- completions: the chat endpoint, a prompt as one user turn ------------------------------
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return chat_to_completion_decorator(self.chat)(prompt, **kwargs)

    @llm_completion_callback()
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return await achat_to_completion_decorator(self.achat)(prompt, **kwargs)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        return stream_chat_to_completion_decorator(self.stream_chat)(prompt, **kwargs)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        return await astream_chat_to_completion_decorator(self.astream_chat)(prompt, **kwargs)
