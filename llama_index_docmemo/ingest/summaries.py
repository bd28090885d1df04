"""Per-page summaries for the Document Schema Memory, written by a VLM at ingest.

Used by the indexer when an LLM is configured (``docmemo index --llm-url ...``); the summaries
are stored with the document's schema, so each page is summarised once per document version.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence

from llama_index.core.base.llms.types import ChatMessage, ImageBlock
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate

from llama_index_docmemo.ingest.pdf import render_page
from llama_index_docmemo.llms.qwen_vl import MAX_IMAGE_SIDE
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.reasoning.llm_json import (
    aask_json,
    ask_json,
    image_block,
    llm_max_images,
    to_messages,
)
from llama_index_docmemo.reasoning.prompts import (
    SUMMARY_REPLY_PROMPT,
    SUMMARY_SYSTEM_PROMPT,
    ImageSlot,
    SystemReplyPrompts,
    summary_prompt,
)
from llama_index_docmemo.reasoning.replies import SUMMARY_SCHEMA, ReplyLimits, parse_summaries
from llama_index_docmemo.types import PageInput, PageRecord

logger = logging.getLogger(__name__)


def _as_input(page: PageInput | PageRecord) -> PageInput:
    """A page as the summariser reads it: a stored record's image is rendered from its PDF."""
    if isinstance(page, PageInput):
        return page
    render = None
    if page.source.lower().endswith(".pdf"):
        render = functools.partial(render_page, page.source, page.page, MAX_IMAGE_SIDE)
    return PageInput(ref=page.ref, text=page.text, load_image=render)


class VLMPageSummarizer(SystemReplyPrompts):
    """``(schema, pages) -> {page number: summary}`` through a chat LLM, a few pages per request.

    ``pages`` are the indexer's page records (images rendered from their PDF on demand) or
    :class:`PageInput`s. Pages whose batch stays malformed after one repair get no summary (the schema keeps its
    first-lines fallback for them); an unreachable server raises ``LLMError``.

    Args:
        llm: a LlamaIndex chat LLM (e.g. :class:`~llama_index_docmemo.QwenVL`).
        batch_size: pages per request (capped by the LLM's images per prompt when sending images).
        with_images: send page images (else text only).
        page_chars: extracted text shown per page.
        concurrency: requests in flight in :meth:`asummarize`.
    """

    name = "vlm"

    def __init__(
        self,
        llm: LLM,
        *,
        batch_size: int = 4,
        with_images: bool = True,
        page_chars: int = 2000,
        concurrency: int = 4,
        limits: ReplyLimits | None = None,
    ) -> None:
        self.llm = llm
        cap = llm_max_images(llm) if with_images else batch_size
        self.batch_size = max(1, min(batch_size, cap))
        self.with_images = with_images
        self.page_chars = page_chars
        self.concurrency = max(1, concurrency)
        self.limits = limits or ReplyLimits()
        self.llm_calls = 0
        self.system_prompt: BasePromptTemplate = SUMMARY_SYSTEM_PROMPT
        self.reply_prompt: BasePromptTemplate = SUMMARY_REPLY_PROMPT

    def _batches(self, pages: Sequence[PageInput | PageRecord]) -> list[list[PageInput]]:
        inputs = [_as_input(p) for p in pages]
        return [inputs[i : i + self.batch_size] for i in range(0, len(inputs), self.batch_size)]

    def _messages(self, schema: DocumentSchema, batch: list[PageInput]) -> list[ChatMessage]:
        images: dict[ImageSlot, ImageBlock] = {}
        if self.with_images:
            for i, page in enumerate(batch):
                if page.load_image is None:
                    continue
                try:
                    images[ImageSlot("page", i)] = image_block(self.llm, page.load_image())
                except Exception as exc:  # the text still gets summarised
                    logger.warning("%s: image could not be loaded (%s)", page.ref, exc)
        parts = summary_prompt(
            schema.title,
            schema.doc_type,
            batch,
            {s.index for s in images},
            page_chars=self.page_chars,
            reply=self.reply_prompt,  # type: ignore[arg-type]
        )
        return to_messages(self.system_prompt.format(), parts, images)

    def _parse(self, batch: list[PageInput]) -> Callable[[str], dict[int, str]]:
        numbers = [p.ref.page for p in batch]
        return lambda text: parse_summaries(text, numbers, self.limits)

    def __call__(
        self, schema: DocumentSchema, pages: Sequence[PageInput | PageRecord]
    ) -> dict[int, str]:
        out: dict[int, str] = {}
        for batch in self._batches(pages):
            found, calls = ask_json(
                self.llm,
                self._messages(schema, batch),
                SUMMARY_SCHEMA,
                "summaries",
                self._parse(batch),
            )
            self.llm_calls += calls
            out.update(found or {})
        return out

    async def asummarize(
        self, schema: DocumentSchema, pages: Sequence[PageInput | PageRecord]
    ) -> dict[int, str]:
        """Async twin of calling the summariser, ``concurrency`` requests at a time."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(batch: list[PageInput]) -> dict[int, str]:
            async with gate:
                messages = await asyncio.to_thread(self._messages, schema, batch)
                found, calls = await aask_json(
                    self.llm, messages, SUMMARY_SCHEMA, "summaries", self._parse(batch)
                )
                self.llm_calls += calls
                return found or {}

        out: dict[int, str] = {}
        for found in await asyncio.gather(*(one(b) for b in self._batches(pages))):
            out.update(found)
        return out
