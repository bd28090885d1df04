"""The schema-summary LLM reranker (the paper's retrieval agent) as a node postprocessor.

The loop's rerank stage takes any ``BaseNodePostprocessor`` (core's ``LLMRerank``, a
cross-encoder, ``ColPaliRerank``); this one asks a chat LLM which candidate pages to read next
from their section and schema summary. The loop passes a :class:`RoundQueryBundle` so it also
sees the user's question and what earlier rounds found and still miss; with a plain
``QueryBundle`` it reranks by the query alone. The loop's rerank stage fires the rerank
events (for this postprocessor and any other).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, SerializeAsAny, model_validator
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.llms.exchange import ImageSlot, ask_structured, request_messages
from llama_index_docmemo.llms.image_policy import DEFAULT_MAX_IMAGE_BYTES
from llama_index_docmemo.llms.images import ImageSizing, load_blocks, max_images, sizing_for
from llama_index_docmemo.llms.servers import ServerMemory, memory_for
from llama_index_docmemo.llms.vision import ImagesSetting, decide_images
from llama_index_docmemo.nodes import node_ref
from llama_index_docmemo.page_images import PageImage
from llama_index_docmemo.paths import default_cache_dir
from llama_index_docmemo.readers.base import PageView, RerankReply, picks_of
from llama_index_docmemo.readers.prompts import (
    RERANK_REPLY_PROMPT,
    RERANK_SYSTEM_PROMPT,
    rerank_prompt,
)
from llama_index_docmemo.readers.vlm import page_loaders_for
from llama_index_docmemo.step_runtime import Steps, arun, offload, run
from llama_index_docmemo.types import EvidenceNote, PageRef


@dataclass
class RoundQueryBundle(QueryBundle):
    """A round's query with the loop's memory: the question, notes found, what is missing."""

    question: str = ""
    evidence: list[EvidenceNote] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


class LLMReranker(BaseNodePostprocessor, PromptMixin):
    """Asks a chat LLM which candidate pages to read next, from their section and summary (and,
    with ``images``, small page images of the first candidates).

    Text by default: cheap next to a reading round. The reply is asked for through LlamaIndex's
    structured output; a reply that stays malformed keeps the incoming order. Prompts:
    ``system`` and ``reply`` (``{k}``).

    Args:
        llm: any LlamaIndex chat LLM.
        top_n: pages returned, best first (the loop takes the first ``k`` it needs).
        max_candidates: candidates described to the LLM (the rest keep their order behind).
        summary_chars: description length per candidate.
        images: True, False (default) or "auto" (see
            :func:`~llama_index_docmemo.llms.vision.decide_images`): page images of the first
            candidates, within the LLM's images per request.
        image_side: long side in pixels of those images as rendered.
        cache_dir: where those images are cached (``<cache_dir>/pages``; the engine passes
            its own).
        max_image_tokens: most tokens one of them may cost (``llms/images.py``).
        max_image_bytes: most base64 bytes their request may carry (``llms/image_policy.py``;
            None: no byte budget).
        server_memory: what the LLM's server taught; default the LLM's own
            (:class:`~llama_index_docmemo.OpenAICompatible`), else one of this reranker's own
            (see :func:`~llama_index_docmemo.llms.servers.memory_for`). The engine gives its
            reader and reranker one.
    """

    llm: SerializeAsAny[LLM] = Field(description="The chat LLM that picks pages.")
    top_n: int = Field(default=5, ge=1)
    max_candidates: int = Field(default=30, ge=1)
    summary_chars: int = Field(default=300, ge=1)
    images: ImagesSetting = Field(default=False)
    image_side: int = Field(default=768, ge=28)
    cache_dir: str = Field(default_factory=lambda: str(default_cache_dir()))
    max_image_tokens: int | None = Field(default=None, ge=64)
    max_image_bytes: int | None = Field(default=DEFAULT_MAX_IMAGE_BYTES, ge=1024)
    system_prompt: SerializeAsAny[BasePromptTemplate] = Field(default=RERANK_SYSTEM_PROMPT)
    reply_prompt: SerializeAsAny[BasePromptTemplate] = Field(default=RERANK_REPLY_PROMPT)
    server_memory: ServerMemory = Field(default_factory=ServerMemory, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _memory_of_the_llm(cls, data: Any) -> Any:
        """The memory :func:`~llama_index_docmemo.llms.servers.memory_for` picks for the LLM."""
        if isinstance(data, dict) and "llm" in data:
            return {**data, "server_memory": memory_for(data["llm"], data.get("server_memory"))}
        return data

    @classmethod
    def class_name(cls) -> str:
        return "DocMemoLLMReranker"

    def _get_prompts(self) -> PromptDictType:
        return {"system": self.system_prompt, "reply": self.reply_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        self.system_prompt = prompts.get("system", self.system_prompt)
        self.reply_prompt = prompts.get("reply", self.reply_prompt)

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _views(self, nodes: list[NodeWithScore]) -> list[PageView]:
        return [
            PageView(
                ref=node_ref(n),
                text=n.node.get_content(),
                section=str(n.node.metadata.get("section", "")),
                summary=str(n.node.metadata.get("summary", "")),
                image=_page_image(n, self.image_side, Path(self.cache_dir)),
            )
            for n in nodes[: self.max_candidates]
        ]

    def _build(
        self, views: list[PageView], query: QueryBundle, send_images: bool
    ) -> Steps[list[ChatMessage]]:
        loaders: dict[ImageSlot, Any] = {}
        if send_images:
            chosen = [i for i, v in enumerate(views) if v.has_image][: max_images(self.llm)]
            found = yield from page_loaders_for([views[i] for i in chosen])
            pairs = zip(chosen, found, strict=True)
            loaders = {ImageSlot("page", i): load for i, load in pairs if load is not None}
        images = (
            (yield offload(load_blocks, self._sized(loaders), self.max_image_bytes))
            if loaders
            else {}
        )
        memory = query if isinstance(query, RoundQueryBundle) else None
        parts = rerank_prompt(
            memory.question if memory and memory.question else query.query_str,
            query.query_str,
            views,
            self.top_n,
            memory.evidence if memory else [],
            memory.missing if memory else [],
            images={s.index for s in images},
            summary_chars=self.summary_chars,
            reply=self.reply_prompt,  # type: ignore[arg-type]
        )
        return (yield from request_messages(self.system_prompt.format(), parts, images))

    def _sized(self, loaders: dict[ImageSlot, Any]) -> dict[ImageSlot, tuple[ImageSizing, Any]]:
        sizing = sizing_for(self.llm, self.max_image_tokens)
        return {slot: (sizing, load) for slot, load in loaders.items()}

    def _order(
        self, nodes: list[NodeWithScore], picked: list[PageRef] | None
    ) -> list[NodeWithScore]:
        """The LLM's picks, then the incoming order, ``top_n`` in all."""
        by_ref = {node_ref(n): n for n in nodes}
        ordered = dict.fromkeys(r for r in (picked or []) if r in by_ref)
        for node in nodes:
            ordered.setdefault(node_ref(node))
        return [by_ref[r] for r in list(ordered)[: self.top_n]]

    def rerank(
        self, nodes: list[NodeWithScore], query: QueryBundle | None
    ) -> Steps[list[NodeWithScore]]:
        """The reranking as steps (run by the sync and async postprocess hooks, or the loop)."""
        if not nodes or query is None:
            return nodes[: self.top_n]
        views = self._views(nodes)
        reply = yield from ask_structured(
            self.llm,
            lambda send: self._build(views, query, send),
            RerankReply,
            send_images=decide_images(self.llm, self.images, self.server_memory).send,
            what="reranker",
            memory=self.server_memory,
        )
        picked = picks_of(reply, [v.ref for v in views], self.top_n) if reply else None
        return self._order(nodes, picked)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return run(self.rerank(nodes, query_bundle))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return await arun(self.rerank(nodes, query_bundle))


def _page_image(node: NodeWithScore, side: int, cache_dir: Path) -> PageImage | None:
    """Where the page image of a page node whose PDF is known is cached, else None."""
    meta = node.node.metadata
    source = meta.get("source") or meta.get("file_path")
    if not source or "doc_version" not in meta:
        return None
    return PageImage(str(source), str(meta["doc_version"]), int(meta["page"]), side, cache_dir)
