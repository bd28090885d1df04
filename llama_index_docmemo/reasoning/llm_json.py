"""One JSON exchange with a chat LLM: ask with a schema, repair a malformed reply once, give up.

Shared by the VLM reader, the page reranker and the ingest summariser. Works with any LlamaIndex
LLM; with :class:`~llama_index_docmemo.llms.QwenVL` the schema also constrains decoding.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ContentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
)
from llama_index.core.llms import LLM

from llama_index_docmemo.llms.qwen_vl import MAX_IMAGE_SIDE, png_image_block
from llama_index_docmemo.reasoning.prompts import REPAIR_SYSTEM, ImageSlot, Part, repair_prompt
from llama_index_docmemo.reasoning.replies import ReplyError

logger = logging.getLogger(__name__)

T = TypeVar("T")


def image_block(llm: LLM, image: Any) -> ImageBlock:
    """``image`` (PIL) as the LLM wants it: its own ``image_block`` when it has one."""
    make = getattr(llm, "image_block", None)
    return make(image) if callable(make) else png_image_block(image, MAX_IMAGE_SIDE)


def llm_max_images(llm: LLM, default: int = 8) -> int:
    """Images the LLM's server takes in one request (``max_images_per_prompt`` when known)."""
    value = getattr(llm, "max_images_per_prompt", None)
    return int(value) if isinstance(value, int) and value > 0 else default


def json_kwargs(llm: LLM, schema: dict[str, Any], name: str) -> dict[str, Any]:
    """Request options constraining the reply to ``schema`` (none for LLMs that cannot)."""
    make = getattr(llm, "json_kwargs", None)
    return make(schema, name) if callable(make) else {}


def to_messages(
    system: str, parts: Sequence[Part] | str, images: Mapping[ImageSlot, ImageBlock]
) -> list[ChatMessage]:
    """A system turn and one user turn of text and image blocks (slots without images vanish)."""
    blocks: list[ContentBlock] = []
    for part in [parts] if isinstance(parts, str) else parts:
        if isinstance(part, ImageSlot):
            if part in images:
                blocks.append(images[part])
        elif blocks and isinstance(blocks[-1], TextBlock):
            blocks[-1] = TextBlock(text=blocks[-1].text + part)
        else:
            blocks.append(TextBlock(text=part))
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=system),
        ChatMessage(role=MessageRole.USER, blocks=blocks),
    ]


def _text(response: ChatResponse) -> str:
    return response.message.content or ""


def _repair_messages(reply: str, problem: ReplyError, schema: dict[str, Any]) -> list[ChatMessage]:
    return to_messages(REPAIR_SYSTEM, repair_prompt(reply, str(problem), json.dumps(schema)), {})


def ask_json(
    llm: LLM,
    messages: list[ChatMessage],
    schema: dict[str, Any],
    name: str,
    parse: Callable[[str], T],
) -> tuple[T | None, int]:
    """``(parsed reply or None, requests made)``; one text-only repair request when malformed."""
    options = json_kwargs(llm, schema, name)
    reply = _text(llm.chat(messages, **options))
    try:
        return parse(reply), 1
    except ReplyError as problem:
        logger.info("%s reply malformed (%s); asking for a repair", name, problem)
        reply = _text(llm.chat(_repair_messages(reply, problem, schema), **options))
    try:
        return parse(reply), 2
    except ReplyError as problem:
        logger.warning("%s reply still malformed after repair (%s); ignored", name, problem)
        return None, 2


async def aask_json(
    llm: LLM,
    messages: list[ChatMessage],
    schema: dict[str, Any],
    name: str,
    parse: Callable[[str], T],
) -> tuple[T | None, int]:
    """Async :func:`ask_json` (the LLM's ``achat``)."""
    options = json_kwargs(llm, schema, name)
    reply = _text(await llm.achat(messages, **options))
    try:
        return parse(reply), 1
    except ReplyError as problem:
        logger.info("%s reply malformed (%s); asking for a repair", name, problem)
        reply = _text(await llm.achat(_repair_messages(reply, problem, schema), **options))
    try:
        return parse(reply), 2
    except ReplyError as problem:
        logger.warning("%s reply still malformed after repair (%s); ignored", name, problem)
        return None, 2
