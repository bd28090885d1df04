"""The VLM reasoner: shows the selected pages (images + text) and the memories, reads Feedback JSON."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ImageBlock
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate

from llama_index_docmemo.reasoning.base import Feedback, Reasoner, ReasoningInput
from llama_index_docmemo.reasoning.llm_json import (
    aask_json,
    ask_json,
    image_block,
    llm_max_images,
    llm_reads_images,
    to_messages,
)
from llama_index_docmemo.reasoning.prompts import (
    READER_REPLY_PROMPT,
    READER_SYSTEM_PROMPT,
    ImageSlot,
    SystemReplyPrompts,
    page_text_budget,
    plan_images,
    reading_prompt,
)
from llama_index_docmemo.reasoning.replies import FEEDBACK_SCHEMA, ReplyLimits, parse_feedback

logger = logging.getLogger(__name__)


class VLMReasoner(Reasoner, SystemReplyPrompts):
    """Reads pages with a chat LLM: page images and text for a multimodal one (e.g.
    :class:`~llama_index_docmemo.QwenVL`), page text for a text-only one (``use_images=False``).

    Its prompts (``system``, ``reply``) are reachable through ``get_prompts``/``update_prompts``.

    Args:
        llm: any LlamaIndex chat LLM that accepts image blocks.
        max_images: images per request; default the LLM's ``max_images_per_prompt`` (else 8).
            Pages get images first, then crops; pages beyond the cap are shown as text.
        use_images: False sends text only; default: the LLM's ``multimodal`` flag, else True.
        text_chars: extracted text shown per round, shared evenly between pages,
            each page getting between ``min_page_chars`` and ``max_page_chars``.
        limits: bounds on what one reply may put into the memories.
    """

    name = "vlm"

    def __init__(
        self,
        llm: LLM,
        *,
        max_images: int | None = None,
        use_images: bool | None = None,
        text_chars: int = 24000,
        max_page_chars: int = 6000,
        min_page_chars: int = 800,
        limits: ReplyLimits | None = None,
    ) -> None:
        self.llm = llm
        self.max_images = max_images if max_images is not None else llm_max_images(llm)
        self.use_images = llm_reads_images(llm) if use_images is None else use_images
        self.text_chars = text_chars
        self.max_page_chars = max_page_chars
        self.min_page_chars = min_page_chars
        self.limits = limits or ReplyLimits()
        self.system_prompt: BasePromptTemplate = READER_SYSTEM_PROMPT
        self.reply_prompt: BasePromptTemplate = READER_REPLY_PROMPT

    def build_messages(self, inp: ReasoningInput) -> list[ChatMessage]:
        """The chat request for one round (loads page and crop images: blocking I/O)."""
        images: dict[ImageSlot, ImageBlock] = {}
        if self.use_images and self.max_images > 0:
            shown = {p.ref for p in inp.pages}
            pages, crops = plan_images(
                [p.load_image is not None for p in inp.pages],
                [c.load_image is not None and c.page in shown for c in inp.crops],
                self.max_images,
            )
            for kind, indices, views in (("page", pages, inp.pages), ("crop", crops, inp.crops)):
                for i in sorted(indices):
                    block = self._load(views[i].load_image, f"{kind} {i + 1}")  # type: ignore[arg-type]
                    if block is not None:
                        images[ImageSlot(kind, i)] = block  # type: ignore[arg-type]
        page_chars = page_text_budget(
            len(inp.pages), self.text_chars, self.max_page_chars, self.min_page_chars
        )
        parts = reading_prompt(
            inp,
            {s.index for s in images if s.kind == "page"},
            {s.index for s in images if s.kind == "crop"},
            page_chars=page_chars,
            reply=self.reply_prompt,  # type: ignore[arg-type]
        )
        return to_messages(self.system_prompt.format(), parts, images)

    def _load(self, load: Callable[[], Any], what: str) -> ImageBlock | None:
        try:
            return image_block(self.llm, load())
        except Exception as exc:  # a page that cannot be rendered is still shown as text
            logger.warning("image of %s could not be loaded (%s); sending its text only", what, exc)
            return None

    def _parse(self, inp: ReasoningInput) -> Callable[[str], Feedback]:
        refs = [p.ref for p in inp.pages]
        return lambda text: parse_feedback(text, refs, self.limits, llm_calls=0)

    @staticmethod
    def _counted(feedback: Feedback | None, calls: int) -> Feedback:
        if feedback is None:  # malformed twice: the round brings no labels, the query goes on
            return Feedback(status="need_more", llm_calls=calls)
        return feedback.model_copy(update={"llm_calls": calls})

    def reason(self, inp: ReasoningInput) -> Feedback:
        if not inp.pages:
            return Feedback(status="need_more")
        messages = self.build_messages(inp)
        feedback, calls = ask_json(
            self.llm, messages, FEEDBACK_SCHEMA, "feedback", self._parse(inp)
        )
        return self._counted(feedback, calls)

    async def areason(self, inp: ReasoningInput) -> Feedback:
        if not inp.pages:
            return Feedback(status="need_more")
        messages = await asyncio.to_thread(self.build_messages, inp)
        feedback, calls = await aask_json(
            self.llm, messages, FEEDBACK_SCHEMA, "feedback", self._parse(inp)
        )
        return self._counted(feedback, calls)
