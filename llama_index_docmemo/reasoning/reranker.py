"""The LLM page reranker (retrieval agent): orders candidates by their schema summaries."""

from __future__ import annotations

from collections.abc import Callable

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import LLM

from llama_index_docmemo.reasoning.base import EvidenceNote, PageReranker, PageView
from llama_index_docmemo.reasoning.llm_json import aask_json, ask_json, to_messages
from llama_index_docmemo.reasoning.prompts import RERANK_SYSTEM, rerank_prompt
from llama_index_docmemo.reasoning.replies import RERANK_SCHEMA, parse_rerank
from llama_index_docmemo.types import PageRef


class LLMReranker(PageReranker):
    """Asks a chat LLM which candidate pages to read next, from their section and summary.

    Text only (no images): cheap next to a reading round. A reply that stays malformed after
    one repair keeps the caller's order. ``llm_calls`` counts the requests made so far.

    Args:
        llm: any LlamaIndex chat LLM.
        max_candidates: candidates described to the LLM (the rest keep their order behind).
        summary_chars: description length per candidate.
    """

    def __init__(self, llm: LLM, *, max_candidates: int = 30, summary_chars: int = 300) -> None:
        self.llm = llm
        self.max_candidates = max_candidates
        self.summary_chars = summary_chars
        self.llm_calls = 0

    def _request(
        self,
        question: str,
        query: str,
        candidates: list[PageView],
        k: int,
        evidence: list[EvidenceNote],
        missing: list[str],
    ) -> tuple[list[ChatMessage], Callable[[str], list[PageRef]]]:
        shown = candidates[: self.max_candidates]
        prompt = rerank_prompt(
            question, query, shown, k, evidence, missing, summary_chars=self.summary_chars
        )
        refs = [c.ref for c in shown]
        return to_messages(RERANK_SYSTEM, prompt, {}), lambda text: parse_rerank(text, refs, k)

    @staticmethod
    def _fill(picked: list[PageRef] | None, candidates: list[PageView], k: int) -> list[PageRef]:
        """The LLM's picks, then the caller's order, ``k`` in all."""
        ordered = dict.fromkeys(picked or [])
        for view in candidates:
            ordered.setdefault(view.ref)
        return list(ordered)[:k]

    def rerank(
        self,
        question: str,
        query: str,
        candidates: list[PageView],
        k: int,
        evidence: list[EvidenceNote],
        missing: list[str],
    ) -> list[PageRef]:
        if not candidates or k <= 0:
            return []
        messages, parse = self._request(question, query, candidates, k, evidence, missing)
        picked, calls = ask_json(self.llm, messages, RERANK_SCHEMA, "rerank", parse)
        self.llm_calls += calls
        return self._fill(picked, candidates, k)

    async def arerank(
        self,
        question: str,
        query: str,
        candidates: list[PageView],
        k: int,
        evidence: list[EvidenceNote],
        missing: list[str],
    ) -> list[PageRef]:
        """Async :meth:`rerank` (the LLM's ``achat``)."""
        if not candidates or k <= 0:
            return []
        messages, parse = self._request(question, query, candidates, k, evidence, missing)
        picked, calls = await aask_json(self.llm, messages, RERANK_SCHEMA, "rerank", parse)
        self.llm_calls += calls
        return self._fill(picked, candidates, k)
