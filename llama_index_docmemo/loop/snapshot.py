"""What the reading and result code see of a query: typed, frozen values the loop hands them.

:class:`~.query.DocMemoLoop` is the only writer of a query's state; :mod:`.reading` and
:mod:`.result` get a :class:`QuerySnapshot` (taken by :meth:`~.query.DocMemoLoop.snapshot` when a
step needs it) and a :class:`RoundSelection`, and never import the loop, so the data flows one way
and each function's inputs are named in its signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore

    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.memory.belief import PageBeliefMemory
    from llama_index_docmemo.memory.episodic import EpisodicMemory
    from llama_index_docmemo.memory.schema import SchemaMemory
    from llama_index_docmemo.reasoning.base import Reasoner
    from llama_index_docmemo.trace import PageScore, RoundTrace, StopReason
    from llama_index_docmemo.types import PageRecord, PageRef


@dataclass(frozen=True)
class RoundSelection:
    """What one round retrieved and chose to read."""

    round: int
    query: str
    lam: float
    candidates: list[PageScore]
    pages: list[PageRecord]
    scores: list[float]
    seconds: float


@dataclass(frozen=True)
class QuerySnapshot:
    """A query's state at one moment, read-only.

    The collections are copies; the three memories are the loop's own objects, which the
    readers of a snapshot only query (copying beliefs every round would cost more than it saves).

    Args:
        question / config: the question as the loop accepts it and the engine's settings.
        schema / beliefs / episodic: the query's Document Schema, Page Belief and Episodic memory.
        records: the records of the pages seen so far (pinned versions).
        read: pages a reader has seen.
        crops: the crops shown so far.
        last_scores: the selection scores of the round's chosen pages.
        llm_calls: LLM calls of the finished rounds.
        pages_known: pages of the documents among the candidates so far.
        reader: the engine's reader (None: selection only).
        cache_dir / evidence_images / reserved_llm_calls: the engine's settings of the same names
            (:class:`~.parts.LoopParts`).
        stop / error / rounds / seconds: the stop reason, the reader's LLM failure, the rounds'
            traces and the seconds spent so far.
    """

    question: str
    config: DocMemoConfig
    schema: SchemaMemory
    beliefs: PageBeliefMemory
    episodic: EpisodicMemory
    records: Mapping[PageRef, PageRecord]
    read: frozenset[PageRef]
    crops: tuple[NodeWithScore, ...]
    last_scores: Mapping[PageRef, float]
    llm_calls: int
    pages_known: int
    reader: Reasoner | None
    cache_dir: Path | None
    evidence_images: bool
    reserved_llm_calls: int
    stop: StopReason | None
    error: str | None
    rounds: tuple[RoundTrace, ...]
    seconds: float
