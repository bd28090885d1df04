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

from llama_index.core.bridge.pydantic import Field, SerializeAsAny
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.nodes import node_ref
from llama_index_docmemo.reasoning.base import PageView
from llama_index_docmemo.reasoning.llm_json import aask_json, ask_json, to_messages
from llama_index_docmemo.reasoning.prompts import (
    RERANK_REPLY_PROMPT,
    RERANK_SYSTEM_PROMPT,
    rerank_prompt,
)
from llama_index_docmemo.reasoning.replies import RERANK_SCHEMA, parse_rerank
from llama_index_docmemo.types import EvidenceNote, PageRef


@dataclass
class RoundQueryBundle(QueryBundle):
    """A round's query with the loop's memory: the question, notes found, what is missing."""

    question: str = ""
    evidence: list[EvidenceNote] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


class LLMReranker(BaseNodePostprocessor, PromptMixin):
    """Asks a chat LLM which candidate pages to read next, from their section and summary.

    Text only (no images): cheap next to a reading round. A reply that stays malformed after one
    repair keeps the incoming order. Prompts: ``system`` and ``reply`` (``{k}``).

    Args:
        llm: any LlamaIndex chat LLM.
        top_n: pages returned, best first (the loop takes the first ``k`` it needs).
        max_candidates: candidates described to the LLM (the rest keep their order behind).
        summary_chars: description length per candidate.
    """

    llm: SerializeAsAny[LLM] = Field(description="The chat LLM that picks pages.")
    top_n: int = Field(default=5, ge=1)
    max_candidates: int = Field(default=30, ge=1)
    summary_chars: int = Field(default=300, ge=1)
    system_prompt: SerializeAsAny[BasePromptTemplate] = Field(default=RERANK_SYSTEM_PROMPT)
    reply_prompt: SerializeAsAny[BasePromptTemplate] = Field(default=RERANK_REPLY_PROMPT)

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

    def _request(
        self, nodes: list[NodeWithScore], query: QueryBundle
    ) -> tuple[list, list[PageRef]]:
        shown = nodes[: self.max_candidates]
        views = [
            PageView(
                ref=node_ref(n),
                text=n.node.get_content(),
                section=str(n.node.metadata.get("section", "")),
                summary=str(n.node.metadata.get("summary", "")),
            )
            for n in shown
        ]
        memory = query if isinstance(query, RoundQueryBundle) else None
        prompt = rerank_prompt(
            memory.question if memory and memory.question else query.query_str,
            query.query_str,
            views,
            self.top_n,
            memory.evidence if memory else [],
            memory.missing if memory else [],
            summary_chars=self.summary_chars,
            reply=self.reply_prompt,  # type: ignore[arg-type]
        )
        return to_messages(self.system_prompt.format(), prompt, {}), [v.ref for v in views]

    def _order(
        self, nodes: list[NodeWithScore], picked: list[PageRef] | None
    ) -> list[NodeWithScore]:
        """The LLM's picks, then the incoming order, ``top_n`` in all."""
        by_ref = {node_ref(n): n for n in nodes}
        ordered = dict.fromkeys(r for r in (picked or []) if r in by_ref)
        for node in nodes:
            ordered.setdefault(node_ref(node))
        return [by_ref[r] for r in list(ordered)[: self.top_n]]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes or query_bundle is None:
            return nodes[: self.top_n]
        messages, refs = self._request(nodes, query_bundle)
        picked, _ = ask_json(self.llm, messages, RERANK_SCHEMA, "rerank", self._parser(refs))
        return self._order(nodes, picked)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes or query_bundle is None:
            return nodes[: self.top_n]
        messages, refs = self._request(nodes, query_bundle)
        picked, _ = await aask_json(self.llm, messages, RERANK_SCHEMA, "rerank", self._parser(refs))
        return self._order(nodes, picked)

    def _parser(self, refs: list[PageRef]):  # noqa: ANN202 - a closure over the shown refs
        return lambda text: parse_rerank(text, refs, self.top_n)
