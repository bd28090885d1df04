"""Structured output behind LlamaIndex's interface for a server of unknown make.

:class:`ServerStructuredOutput` gives :class:`~llama_index_docmemo.OpenAICompatible` its
``structured_predict`` / ``astructured_predict``: the ``structured_mode`` setting, with "auto"
walking ``json_schema`` -> llama.cpp's ``json_object`` + schema -> the schema in the prompt (one
repair request) as a server refuses each form (``llms/structured.py``: the field its error names, else its text),
remembering per server what worked in the LLM's ``server_memory`` (``llms/servers.py``). Written
once as steps (``step_runtime.py``) for the sync and async entries.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.llm import (
    LLMStructuredPredictEndEvent,
    LLMStructuredPredictStartEvent,
)
from llama_index.core.prompts import BasePromptTemplate
from pydantic import BaseModel

from llama_index_docmemo.blocking import to_thread
from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms.failures import describe, refuses_form_of
from llama_index_docmemo.llms.servers import ServerMemory, server_key
from llama_index_docmemo.llms.structured import (
    AUTO_ORDER,
    ask_with_schema_in_prompt,
    next_mode,
    reply_schema,
    request_options,
    validate_reply,
)
from llama_index_docmemo.step_runtime import Steps, arun, either, run

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

M = TypeVar("M", bound=BaseModel)


class ServerStructuredOutput:
    """Mixin of an OpenAI-compatible chat LLM (it has ``api_base``, ``model``,
    ``structured_mode``, ``server_memory``, and ``chat``/``achat`` raising :class:`LLMError`
    with the ``openai`` error as its cause)."""

    api_base: str
    model: str
    structured_mode: str
    server_memory: ServerMemory

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
