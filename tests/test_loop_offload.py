"""What the async path keeps off the event loop: the work on a request's image blocks.

LlamaIndex validates an image block again each time a message or a template takes it (its
base64 decoded and encoded), and an ``httpx`` client loads the CA certificates as it is made;
on the loop, eight concurrent queries stalled it past 100 ms
(``integration_tests/test_async_nonblocking.py``). Each test records the thread a piece ran on.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, ImageBlock
from llama_index.core.prompts import ChatPromptTemplate
from PIL import Image
from pydantic import BaseModel

from llama_index_docmemo.llms import QwenVL, exchange
from llama_index_docmemo.llms.exchange import ImageSlot
from llama_index_docmemo.llms.images import ImageSizing, encode_image
from llama_index_docmemo.step_runtime import arun, run


class Reply(BaseModel):
    answer: str


def page_block() -> ImageBlock:
    return encode_image(Image.new("RGB", (600, 800), "white"), ImageSizing("openai"))


def recording(fn: Callable[..., Any], threads: list[int]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return fn(*args, **kwargs)

    return wrapper


def test_a_request_with_images_is_built_off_the_loop_and_one_without_on_it(monkeypatch) -> None:
    threads: list[int] = []
    monkeypatch.setattr(exchange, "to_messages", recording(exchange.to_messages, threads))
    slot = ImageSlot("page", 0)
    parts = ["read ", slot, " now"]

    async def build(images: dict) -> tuple[list[ChatMessage], int]:
        return await arun(exchange.request_messages("sys", parts, images)), threading.get_ident()

    messages, loop_thread = asyncio.run(build({slot: page_block()}))
    assert threads[-1] != loop_thread
    kinds = [type(b).__name__ for b in messages[1].blocks]
    assert kinds == ["TextBlock", "ImageBlock", "TextBlock"]
    asyncio.run(build({}))
    assert threads[-1] == threading.get_ident()  # asyncio.run's loop runs on this thread
    run(exchange.request_messages("sys", parts, {slot: page_block()}))  # the sync driver: inline
    assert threads[-1] == threading.get_ident()


def test_the_native_exchange_makes_its_template_off_the_loop(monkeypatch) -> None:
    threads: list[int] = []
    monkeypatch.setattr(
        exchange, "ChatPromptTemplate", recording(exchange.ChatPromptTemplate, threads)
    )

    class Native:
        async def astructured_predict(self, model: type[Reply], prompt: ChatPromptTemplate):
            return model(answer=str(len(prompt.message_templates)))

        def structured_predict(self, model: type[Reply], prompt: ChatPromptTemplate):
            raise AssertionError("the async driver takes the async form")

    async def ask() -> tuple[Reply | None, int]:
        messages = [ChatMessage(role="user", blocks=[page_block()])]
        reply = await arun(exchange._ask_native(Native(), messages, Reply))  # type: ignore[arg-type]
        return reply, threading.get_ident()

    reply, loop_thread = asyncio.run(ask())
    assert reply == Reply(answer="1") and threads and threads[0] != loop_thread


def test_the_qwen_vl_client_formats_its_prompt_off_the_loop(monkeypatch) -> None:
    threads: list[int] = []
    original = ChatPromptTemplate.format_messages
    monkeypatch.setattr(
        ChatPromptTemplate,
        "format_messages",
        lambda self, **kw: recording(original, threads)(self, **kw),
    )
    llm = QwenVL(api_base="http://127.0.0.1:9/v1", structured_mode="json_schema")

    async def achat(self, messages, **kwargs) -> ChatResponse:
        assert isinstance(messages[0].blocks[0], ImageBlock)
        return ChatResponse(message=ChatMessage(role="assistant", content='{"answer": "42"}'))

    monkeypatch.setattr(QwenVL, "achat", achat)

    async def ask() -> tuple[Reply, int]:
        prompt = ChatPromptTemplate(message_templates=[ChatMessage(blocks=[page_block()])])
        return await llm.astructured_predict(Reply, prompt), threading.get_ident()

    reply, loop_thread = asyncio.run(ask())
    assert reply == Reply(answer="42") and threads == [threads[0]] and threads[0] != loop_thread


def test_a_loop_s_client_is_made_once_off_the_loop_and_kept_for_the_loop(
    monkeypatch,
) -> None:
    llm = QwenVL(api_base="http://127.0.0.1:9/v1")
    threads: list[int] = []
    monkeypatch.setattr(QwenVL, "_new_aclient", recording(QwenVL._new_aclient, threads))

    async def clients() -> tuple[list[Any], Any, int]:
        together = await asyncio.gather(*(llm._loop_client() for _ in range(8)))
        return together, await llm._loop_client(), threading.get_ident()

    together, later, loop_thread = asyncio.run(clients())
    assert all(client is later for client in together)
    assert len(threads) == 1 and loop_thread not in threads  # eight first requests, one client


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_an_image_s_size_comes_from_its_header_alone(monkeypatch, fmt: str) -> None:
    from llama_index_docmemo.llms.images import block_size, image_header

    image = Image.effect_noise((900, 1200), 60).convert("RGB")  # large enough to need a prefix
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    block = ImageBlock(image=buffer.getvalue(), image_mimetype=f"image/{fmt.lower()}")

    def whole(self, as_base64: bool = False):
        raise AssertionError("the whole image was decoded to read its size")

    monkeypatch.setattr(ImageBlock, "resolve_image", whole)
    assert image_header(block) == (fmt, (900, 1200)) and block_size(block) == (900, 1200)


def test_a_header_longer_than_the_prefix_is_read_from_the_whole_image() -> None:
    from llama_index_docmemo.llms.images import HEADER_CHARS, image_header

    buffer = io.BytesIO()
    profile = bytes(range(256)) * (HEADER_CHARS // 128)  # an ICC profile past the prefix
    Image.new("RGB", (300, 200), "white").save(buffer, format="JPEG", icc_profile=profile)
    block = ImageBlock(image=buffer.getvalue(), image_mimetype="image/jpeg")
    assert image_header(block) == ("JPEG", (300, 200))


def test_blocking_calls_share_a_pool_of_one_thread_a_core_in_the_caller_s_context() -> None:
    import contextvars
    import os
    import time

    from llama_index_docmemo.step_runtime import offload

    scope: contextvars.ContextVar[str] = contextvars.ContextVar("scope", default="none")

    def work() -> tuple[str, str]:
        time.sleep(0.05)
        return threading.current_thread().name, scope.get()

    def steps():
        return (yield offload(work))

    async def many() -> list[tuple[str, str]]:
        scope.set("the caller's")
        return await asyncio.gather(*(arun(steps()) for _ in range(12)))

    results = asyncio.run(many())
    names = {name for name, _ in results}
    assert all(name.startswith("docmemo-blocking") for name in names)
    assert len(names) <= min(32, max(2, os.cpu_count() or 2))
    assert {seen for _, seen in results} == {"the caller's"}
