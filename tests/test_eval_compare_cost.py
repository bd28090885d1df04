"""The cost meter counts LLM requests from LlamaIndex's instrumentation events, per measured block."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    CompletionResponse,
    CompletionResponseGen,
    ImageBlock,
    LLMMetadata,
    TextBlock,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback

from llama_index_docmemo.evaluation.compare.cost import CostMeter, usage_of

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS"
    b"\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x9a\x9e\xf3\x00\x00\x00"
    b"\x00IEND\xaeB`\x82"
)


class UsageLLM(CustomLLM):
    """Answers "ok"; reports usage in ``raw`` (like the OpenAI client), in ``additional_kwargs``, or
    not at all. Its ``chat`` calls ``complete`` inside (CustomLLM's own wiring): nested events."""

    where: str = "raw"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="usage-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        usage = {"prompt_tokens": len(prompt), "completion_tokens": 2}
        if self.where == "raw":
            return CompletionResponse(text="ok", raw={"usage": usage})
        if self.where == "kwargs":
            return CompletionResponse(text="ok", additional_kwargs=usage)
        return CompletionResponse(text="ok")

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        yield self.complete(prompt)


def picture_message() -> ChatMessage:
    return ChatMessage(
        role="user",
        blocks=[TextBlock(text="read these"), ImageBlock(image=PNG), ImageBlock(image=PNG)],
    )


def test_requests_tokens_and_images_are_counted_once_per_request() -> None:
    llm, meter = UsageLLM(), CostMeter()
    with meter.measure() as cost:
        llm.complete("abcd")  # 4 prompt "tokens"
        llm.chat([picture_message()])  # chat calling complete inside: one request
    assert (cost.llm_calls, cost.images, cost.completion_tokens) == (2, 2, 4)
    assert cost.prompt_tokens > 4 and cost.requests_without_usage == 0 and cost.seconds > 0
    llm.complete("outside any block")  # not counted anywhere
    assert cost.llm_calls == 2


def test_usage_in_additional_kwargs_or_missing() -> None:
    meter = CostMeter()
    with meter.measure() as cost:
        UsageLLM(where="kwargs").complete("abc")
        UsageLLM(where="none").complete("abc")
    assert (cost.llm_calls, cost.prompt_tokens, cost.requests_without_usage) == (2, 3, 1)
    assert usage_of(None) is None
    assert usage_of(CompletionResponse(text="", raw={"usage": {"prompt_tokens": 1}})) is None


def test_concurrent_async_requests_are_each_counted() -> None:
    llm, meter = UsageLLM(), CostMeter()

    async def ask_two() -> None:
        await asyncio.gather(llm.achat([picture_message()]), llm.acomplete("abcdef"))

    with meter.measure() as cost:
        asyncio.run(ask_two())
    assert (cost.llm_calls, cost.images, cost.completion_tokens) == (2, 2, 4)


def test_blocks_are_separate_and_the_handler_leaves() -> None:
    from llama_index.core.instrumentation import get_dispatcher

    llm, meter = UsageLLM(), CostMeter()
    before = list(get_dispatcher().event_handlers)
    with meter.measure() as first:
        llm.complete("a")
    with meter.measure() as second:
        llm.complete("a")
        llm.complete("a")
    assert (first.llm_calls, second.llm_calls) == (1, 2)
    assert get_dispatcher().event_handlers == before
