"""One JSON exchange with a chat LLM: fit the window, ask with a schema, repair once, give up.

Shared by the VLM reader, the page reranker and the ingest summariser. Works with any LlamaIndex
LLM (schema in the system turn); with :class:`~llama_index_docmemo.llms.OpenAICompatible` the
schema also constrains decoding, in whichever form the server accepts.
"""

from __future__ import annotations

import asyncio
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

from llama_index_docmemo.llms.context import (
    ContextBudget,
    ContextWindowError,
    fit_messages,
    learned_ratio,
)
from llama_index_docmemo.llms.images import MAX_IMAGE_SIDE, png_image_block
from llama_index_docmemo.llms.servers import SERVERS
from llama_index_docmemo.llms.structured import with_schema_in_prompt
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


def llm_reads_images(llm: LLM) -> bool:
    """Whether to send page images: the LLM's ``multimodal`` flag when it has one, else True."""
    value = getattr(llm, "multimodal", None)
    return value if isinstance(value, bool) else True


def context_budget(llm: LLM) -> ContextBudget | None:
    """What a prompt to ``llm`` may hold: the LLM's own budget, else its metadata (None: unknown)."""
    own = getattr(llm, "context_budget", None)
    if callable(own):
        return own()
    meta = getattr(llm, "metadata", None)
    if meta is None:
        return None
    window = meta.context_window
    reply = meta.num_output if meta.num_output > 0 else min(1024, window // 4)
    images = 1024 if llm_reads_images(llm) else 0
    return ContextBudget(window=window, reply_tokens=reply, tokens_per_image=images)


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


def _fit(llm: LLM, messages: list[ChatMessage], name: str) -> list[ChatMessage]:
    budget = context_budget(llm)
    if budget is None:
        return messages
    where = f"{getattr(llm, 'api_base', None) or type(llm).__name__} ({name})"
    return fit_messages(messages, budget, where=where)


def _learn(llm: LLM, sent: list[ChatMessage], error: ContextWindowError) -> None:
    """After a server's overflow error: a tighter characters-per-token ratio for its prompts."""
    base_url = getattr(llm, "api_base", None)
    budget = context_budget(llm)
    if not base_url or not error.prompt_tokens or budget is None:
        return
    images = sum(isinstance(b, ImageBlock) for m in sent for b in m.blocks)
    text_tokens = error.prompt_tokens - images * budget.tokens_per_image
    chars = sum(len(b.text) for m in sent for b in m.blocks if isinstance(b, TextBlock))
    ratio = learned_ratio(chars, text_tokens, budget.chars_per_token)
    SERVERS.update(base_url, chars_per_token=ratio)
    logger.info(
        "%s: prompt of %d chars was %d tokens; now %.2f chars/token",
        base_url,
        chars,
        error.prompt_tokens,
        ratio,
    )


def _send(llm: LLM, messages: list[ChatMessage], schema: dict[str, Any], name: str) -> str:
    structured = getattr(llm, "structured_chat", None)
    if callable(structured):
        return _text(structured(messages, schema, name))
    return _text(llm.chat(with_schema_in_prompt(messages, schema)))


async def _asend(llm: LLM, messages: list[ChatMessage], schema: dict[str, Any], name: str) -> str:
    structured = getattr(llm, "astructured_chat", None)
    if callable(structured):
        return _text(await structured(messages, schema, name))
    return _text(await llm.achat(with_schema_in_prompt(messages, schema)))


def _exchange(
    llm: LLM, messages: list[ChatMessage], schema: dict[str, Any], name: str
) -> tuple[str, int]:
    """``(reply, requests made)``: the prompt fitted to the window, refitted once on overflow."""
    fitted = _fit(llm, messages, name)
    try:
        return _send(llm, fitted, schema, name), 1
    except ContextWindowError as error:
        _learn(llm, fitted, error)
        return _send(llm, _fit(llm, messages, name), schema, name), 2


async def _aexchange(
    llm: LLM, messages: list[ChatMessage], schema: dict[str, Any], name: str
) -> tuple[str, int]:
    """Async :func:`_exchange`."""
    fitted = await asyncio.to_thread(_fit, llm, messages, name)
    try:
        return await _asend(llm, fitted, schema, name), 1
    except ContextWindowError as error:
        _learn(llm, fitted, error)
        return await _asend(llm, _fit(llm, messages, name), schema, name), 2


def ask_json(
    llm: LLM,
    messages: list[ChatMessage],
    schema: dict[str, Any],
    name: str,
    parse: Callable[[str], T],
) -> tuple[T | None, int]:
    """``(parsed reply or None, requests made)``; one text-only repair request when malformed.

    The prompt is fitted to the LLM's context window first (document material cut evenly);
    the schema goes in whichever form the server takes (:class:`OpenAICompatible`), or into
    the system turn for any other LlamaIndex LLM.
    """
    reply, calls = _exchange(llm, messages, schema, name)
    try:
        return parse(reply), calls
    except ReplyError as problem:
        logger.info("%s reply malformed (%s); asking for a repair", name, problem)
        reply, more = _exchange(llm, _repair_messages(reply, problem, schema), schema, name)
    try:
        return parse(reply), calls + more
    except ReplyError as problem:
        logger.warning("%s reply still malformed after repair (%s); ignored", name, problem)
        return None, calls + more


async def aask_json(
    llm: LLM,
    messages: list[ChatMessage],
    schema: dict[str, Any],
    name: str,
    parse: Callable[[str], T],
) -> tuple[T | None, int]:
    """Async :func:`ask_json` (the LLM's ``achat``)."""
    reply, calls = await _aexchange(llm, messages, schema, name)
    try:
        return parse(reply), calls
    except ReplyError as problem:
        logger.info("%s reply malformed (%s); asking for a repair", name, problem)
        repair = _repair_messages(reply, problem, schema)
        reply, more = await _aexchange(llm, repair, schema, name)
    try:
        return parse(reply), calls + more
    except ReplyError as problem:
        logger.warning("%s reply still malformed after repair (%s); ignored", name, problem)
        return None, calls + more
