"""What every query of an engine shares, and the question as the loop accepts it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import QuestionError
from llama_index_docmemo.levers.rounds import RoundLevers

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.reasoning.base import Reasoner
    from llama_index_docmemo.store.base import PageStore


@dataclass(frozen=True)
class LoopParts:
    """What every query of an engine shares, read-only.

    Args:
        store / encoder: the page store and the encoder that filled it.
        config: loop parameters and ablation switches.
        levers: the retrieval levers (and their reference-graph cache), shared by the queries.
        reader: reads the selected pages (None: selection only, as the retriever uses it).
        reranker: any node postprocessor reordering each round's candidates (LLMRerank, a
            cross-encoder, :class:`~llama_index_docmemo.postprocessors.LLMReranker`...).
        crops: adds table/figure crops of the pages read (adaptive granularity).
        callback_manager: receives a RETRIEVE event per round.
        evidence_images / cache_dir: render evidence pages to PNG files under ``cache_dir``.
        reserved_llm_calls: calls of ``max_llm_calls`` kept for a final answer (streaming).
        round_events: fire LlamaIndex retrieval events per round (off under a retriever,
            whose ``retrieve`` fires them).
        cpu: where the async driver runs GIL-holding work (renders, layouts; None: the
            process's CPU thread, see :mod:`llama_index_docmemo.blocking`).
        calls: the bounded pool the sync driver runs calls on under ``max_seconds``, so it can
            stop waiting for one at the deadline (an engine's: the process's blocking pool;
            None: inline, checked between calls).
    """

    store: PageStore
    encoder: PageEncoder
    config: DocMemoConfig
    levers: RoundLevers
    reader: Reasoner | None = None
    reranker: BaseNodePostprocessor | None = None
    crops: BaseNodePostprocessor | None = None
    callback_manager: CallbackManager | None = None
    evidence_images: bool = False
    cache_dir: Path | None = None
    reserved_llm_calls: int = 0
    round_events: bool = True
    cpu: Executor | None = None
    calls: Executor | None = None


def clean_question(question: str, config: DocMemoConfig) -> str:
    """The question as the loop uses it: refused when empty, refused or cut when too long."""
    text = question.strip() if isinstance(question, str) else ""
    if not text:
        raise QuestionError("the question is empty: ask something to search the documents for")
    limit = config.budget.max_question_chars
    if len(text) > limit:
        if config.budget.question_overflow == "error":
            raise QuestionError(
                f"the question has {len(text)} characters, more than max_question_chars={limit}; "
                "shorten it, or set question_overflow='truncate' to cut it"
            )
        text = text[:limit].rstrip()
    return text
