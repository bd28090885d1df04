"""What ``docmemo compare`` counts as an answer's cost: LLM requests from LlamaIndex's instrumentation
events (``events.counting_llm_calls``), per block, nested blocks included."""

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
from llama_index.core.settings import Settings

from llama_index_docmemo.events import counting_llm_calls

PNG = (  # a 1x1 PNG
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
    llm = UsageLLM()
    with counting_llm_calls() as cost:
        llm.complete("abcd")  # 4 prompt "tokens"
        llm.chat([picture_message()])  # chat calling complete inside: one request
    assert (cost.calls, cost.images, cost.completion_tokens) == (2, 2, 4)
    assert cost.prompt_tokens > 4 and cost.without_usage == 0
    llm.complete("outside any block")  # not counted anywhere
    assert cost.calls == 2


def test_usage_in_additional_kwargs_or_counted_by_the_tokenizer() -> None:
    prompt = "Revenue grew 12 percent in 2023 (see page 4)."
    with counting_llm_calls() as cost:
        UsageLLM(where="kwargs").complete("abc")
        UsageLLM(where="none").complete(prompt)  # no usage: Settings.tokenizer counts
    assert (cost.calls, cost.without_usage) == (2, 1)
    counted = len(Settings.tokenizer(prompt))
    assert counted != len(prompt) and counted != round(len(prompt) / 2.5)
    assert cost.prompt_tokens == 3 + counted
    assert cost.completion_tokens == 2 + len(Settings.tokenizer("ok"))


def test_an_apps_tokenizer_counts_where_usage_is_missing() -> None:
    previous = Settings._tokenizer
    Settings.tokenizer = lambda text: text.split()  # the app's own tokenizer: words
    try:
        with counting_llm_calls() as cost:
            UsageLLM(where="none").chat([picture_message()])
    finally:
        Settings._tokenizer = previous
    assert cost.prompt_tokens == 2 + cost.image_tokens  # "read these" and the images' estimate
    assert cost.completion_tokens == 1 and cost.without_usage == 1


def test_concurrent_async_requests_are_each_counted() -> None:
    llm = UsageLLM()

    async def ask_two() -> None:
        await asyncio.gather(llm.achat([picture_message()]), llm.acomplete("abcdef"))

    with counting_llm_calls() as cost:
        asyncio.run(ask_two())
    assert (cost.calls, cost.images, cost.completion_tokens) == (2, 2, 4)


def test_a_block_inside_another_counts_in_both() -> None:
    llm = UsageLLM()
    with counting_llm_calls() as answer:  # compare's count of one answer
        llm.complete("a")
        with counting_llm_calls() as round_:  # the engine's own count of one round
            llm.complete("ab")
            with counting_llm_calls(round_):  # the same tally again: not counted twice
                llm.complete("abc")
    assert (answer.calls, answer.prompt_tokens) == (3, 6)
    assert (round_.calls, round_.prompt_tokens) == (2, 5)
