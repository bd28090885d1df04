"""The LLM reader: shows the selected pages (images and text) and the memories to any LlamaIndex
chat LLM and reads its structured reply."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import ChatMessage, ImageBlock
from llama_index.core.prompts import BasePromptTemplate

from llama_index_docmemo.llms.exchange import (
    ImageSlot,
    ReplyLimits,
    SystemReplyPrompts,
    ask_structured,
    request_messages,
)
from llama_index_docmemo.llms.image_policy import DEFAULT_MAX_IMAGE_BYTES
from llama_index_docmemo.llms.images import ImageSizing, crop_sizing, load_blocks, sizing_for
from llama_index_docmemo.llms.images import max_images as llm_max_images
from llama_index_docmemo.llms.servers import ServerMemory, memory_for
from llama_index_docmemo.llms.vision import ImageChoice, ImagesSetting, decide_images
from llama_index_docmemo.page_images import page_image_files
from llama_index_docmemo.readers.base import (
    Feedback,
    FeedbackReply,
    PageView,
    Reader,
    ReaderInput,
    feedback_of,
)
from llama_index_docmemo.readers.prompts import (
    READER_REPLY_PROMPT,
    READER_SYSTEM_PROMPT,
    page_text_budget,
    pages_shown_by_their_crop,
    plan_images,
    reading_prompt,
)
from llama_index_docmemo.step_runtime import Steps, offload, run

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

logger = logging.getLogger(__name__)


class VLMReader(Reader, SystemReplyPrompts):
    """Reads pages with any LlamaIndex chat LLM: page images and text for one that takes images
    (``images``: see :func:`~llama_index_docmemo.llms.vision.decide_images`), page text otherwise.
    The reply is asked for through LlamaIndex's structured output (``llms/exchange.py``).

    Its prompts (``system``, ``reply``) are reachable through ``get_prompts``/``update_prompts``.

    Args:
        llm: any LlamaIndex chat LLM (``OpenAI``, ``Anthropic``, ``Ollama``, ``OpenAILike``,
            :class:`~llama_index_docmemo.OpenAICompatible`...).
        images: True, False or "auto" (the LLM's own flag, else its model family).
        max_images: images per request; default the LLM's ``max_images_per_prompt`` (else 8).
            Pages get images first, then crops; pages beyond the cap are shown as text.
        text_chars: extracted text shown per round, shared evenly between pages,
            each page getting between ``min_page_chars`` and ``max_page_chars``.
        limits: bounds on what one reply may put into the memories.
        max_image_tokens: most tokens one image may cost (``llms/images.py``; None: the
            resolution the model uses).
        max_image_bytes: most base64 bytes the images of one request may take
            (``llms/image_policy.py``: lower quality, then fewer pixels, the largest image
            first); None: no byte budget.
        server_memory: what the LLM's server taught (a refusal of images, its window); default
            the LLM's own (:class:`~llama_index_docmemo.OpenAICompatible`), else one of this
            reader's own (see :func:`~llama_index_docmemo.llms.servers.memory_for`).
    """

    name = "llm"

    def __init__(
        self,
        llm: LLM,
        *,
        images: ImagesSetting = "auto",
        max_images: int | None = None,
        text_chars: int = 24000,
        max_page_chars: int = 6000,
        min_page_chars: int = 800,
        limits: ReplyLimits | None = None,
        server_memory: ServerMemory | None = None,
        max_image_tokens: int | None = None,
        max_image_bytes: int | None = DEFAULT_MAX_IMAGE_BYTES,
    ) -> None:
        self.llm = llm
        self.sizing = sizing_for(llm, max_image_tokens)
        self.max_image_bytes = max_image_bytes
        self.images = images
        self.server_memory = memory_for(llm, server_memory)
        self.image_choice = decide_images(llm, images, self.server_memory)
        self.max_images = max_images if max_images is not None else llm_max_images(llm)
        self.text_chars = text_chars
        self.max_page_chars = max_page_chars
        self.min_page_chars = min_page_chars
        self.limits = limits or ReplyLimits()
        self.system_prompt: BasePromptTemplate = READER_SYSTEM_PROMPT
        self.reply_prompt: BasePromptTemplate = READER_REPLY_PROMPT

    def images_now(self) -> ImageChoice:
        """This round's decision (a server that refused images meanwhile gets text)."""
        choice = decide_images(self.llm, self.images, self.server_memory)
        if choice.send != self.image_choice.send:
            logger.info("reader: %s", choice.reason)
            self.image_choice = choice
        return choice

    def build(self, inp: ReaderInput, send_images: bool) -> Steps[list[ChatMessage]]:
        """The chat request for one round; page images are rendered once into the cache (in
        worker processes under the async driver) and crops read from theirs, off the loop."""
        loaders: dict[ImageSlot, Callable[[], Any]] = {}
        crop_loaders: dict[ImageSlot, Callable[[], Any]] = {}
        cropped: set[int] = set()
        if send_images and self.max_images > 0:
            shown = {p.ref for p in inp.pages}
            cropped = pages_shown_by_their_crop(inp.pages, inp.crops)
            pages, crops = plan_images(
                [p.has_image and i not in cropped for i, p in enumerate(inp.pages)],
                [c.load_image is not None and c.page in shown for c in inp.crops],
                self.max_images,
            )
            chosen = sorted(pages)
            found = yield from page_loaders_for([inp.pages[i] for i in chosen])
            pairs = zip(chosen, found, strict=True)
            loaders.update({ImageSlot("page", i): load for i, load in pairs if load is not None})
            crop_loaders = {ImageSlot("crop", j): inp.crops[j].load_image for j in sorted(crops)}
        images: dict[ImageSlot, ImageBlock] = {}
        if loaders or crop_loaders:
            images = yield offload(
                round_images, self.sizing, loaders, crop_loaders, self.max_image_bytes
            )
        page_chars = page_text_budget(
            len(inp.pages), self.text_chars, self.max_page_chars, self.min_page_chars
        )
        parts = reading_prompt(
            inp,
            {s.index for s in images if s.kind == "page"},
            {s.index for s in images if s.kind == "crop"},
            page_chars=page_chars,
            cropped={
                i
                for i in cropped
                for j, crop in enumerate(inp.crops)
                if crop.page == inp.pages[i].ref and ImageSlot("crop", j) in images
            },
            reply=self.reply_prompt,  # type: ignore[arg-type]
        )
        return (yield from request_messages(self.system_prompt.format(), parts, images))

    def read_steps(self, inp: ReaderInput) -> Steps[Feedback]:
        if not inp.pages:
            return Feedback(status="need_more")
        reply = yield from ask_structured(
            self.llm,
            lambda send: self.build(inp, send),
            FeedbackReply,
            send_images=self.images_now().send,
            what="reader",
            memory=self.server_memory,
        )
        if reply is None:  # malformed: the round brings no labels, the query goes on
            problem = f"its reply was not a valid {FeedbackReply.__name__} (the JSON asked for)"
            return Feedback(status="need_more", problem=problem)
        return feedback_of(reply, [p.ref for p in inp.pages], self.limits)

    def read(self, inp: ReaderInput) -> Feedback:
        return run(self.read_steps(inp))


def round_images(
    sizing: ImageSizing,
    pages: dict[ImageSlot, Callable[[], Any]],
    crops: dict[ImageSlot, Callable[[], Any]],
    max_bytes: int | None,
) -> dict[ImageSlot, ImageBlock]:
    """A round's page images sized by ``sizing`` and its crops by :func:`crop_sizing`, all within
    ``max_bytes`` (the pages first in priority, in reading order, then the crops; blocking)."""
    crop = crop_sizing(sizing)
    return load_blocks(
        {**{k: (sizing, f) for k, f in pages.items()}, **{k: (crop, f) for k, f in crops.items()}},
        max_bytes,
    )


def page_loaders_for(views: list[PageView]) -> Steps[list[Callable[[], Any] | None]]:
    """Steps: a loader of each view's image: its cached file (rendered now where missing), else
    its own ``load_image``; None for a page whose image cannot be had."""
    cached = [v.image for v in views if v.image is not None and v.image.renderable]
    files = iter((yield from page_image_files(cached)) if cached else [])
    loaders: list[Callable[[], Any] | None] = []
    for view in views:
        if view.image is not None and view.image.renderable:
            path = next(files)
            loaders.append((lambda path=path: path) if path is not None else view.load_image)
        else:
            loaders.append(view.load_image)
    return loaders
