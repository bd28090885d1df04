"""DocMemoRunner: the engine's named parts, owned by one object.

Modelled on LlamaIndex's ``RetrieverQueryEngine`` (a retriever, a synthesizer and
postprocessors, each a named part): one frozen runner holds the store, the encoder, the config,
the levers, the reader, the reranker, the crops, the callbacks, the evidence settings and the
executors, and every query of an engine runs over it (``query.py``). The retriever holds a
runner without a reader and runs its round 1; the engine holds the same runner with its reader
and crops and runs every round. A query borrows nothing from elsewhere, and a runner is never
changed: :meth:`DocMemoRunner.with_parts` returns another.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks import CallbackManager

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.levers.rounds import RoundLevers
from llama_index_docmemo.step_runtime import blocking_pool

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.readers.base import Reader
    from llama_index_docmemo.store.base import PageStore


@dataclass(frozen=True)
class DocMemoRunner:
    """The parts every query of an engine runs over, read-only.

    Args:
        store / encoder: the page store and the encoder that filled it.
        config: loop parameters and ablation switches.
        levers: the retrieval levers (and their reference-graph and card caches).
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
            process's CPU thread, see :mod:`llama_index_docmemo.step_runtime`).
    """

    store: PageStore
    encoder: PageEncoder
    config: DocMemoConfig
    levers: RoundLevers
    reader: Reader | None = None
    reranker: BaseNodePostprocessor | None = None
    crops: BaseNodePostprocessor | None = None
    callback_manager: CallbackManager | None = None
    evidence_images: bool = False
    cache_dir: Path | None = None
    reserved_llm_calls: int = 0
    round_events: bool = True
    cpu: Executor | None = None

    @classmethod
    def build(
        cls, store: PageStore, encoder: PageEncoder, config: DocMemoConfig, **parts: Any
    ) -> DocMemoRunner:
        """A runner over ``store`` (refused when ``encoder`` did not fill it), its levers
        built; ``parts`` are the other fields."""
        if getattr(store, "encoder_name", encoder.name) != encoder.name:
            raise StoreError(
                f"the store was built with encoder {store.encoder_name!r}, "
                f"but the retriever was given {encoder.name!r}"
            )
        levers = RoundLevers(store, encoder, config.levers, config.selection)
        return cls(store=store, encoder=encoder, config=config, levers=levers, **parts)

    @property
    def calls(self) -> Executor:
        """The bounded pool the sync driver runs calls on under ``max_seconds``, so it can stop
        waiting for one at the deadline: the process's blocking pool, asked each time (a forked
        worker gets its own)."""
        return blocking_pool()

    def callbacks(self) -> CallbackManager:
        return self.callback_manager or CallbackManager([])

    def with_parts(self, **changes: Any) -> DocMemoRunner:
        """This runner with ``changes`` (a reader, crops, callbacks...); the levers are shared."""
        return replace(self, **changes)

    def first_round(self, top_k: int | None) -> DocMemoRunner:
        """What ``retrieve`` runs: one round choosing ``top_k`` pages among at least as many
        candidates, firing no events of its own (``BaseRetriever.retrieve`` fires them). It
        reads nothing, so ``top_k`` is not bound by the reading cap of ``pages_per_round`` (50
        pages a reader is shown at once). The levers are shared unless the candidate search
        widens."""
        view = replace(self, round_events=False)
        if top_k is None:
            return view
        config = self.config
        wider = config.updated(candidates=max(config.selection.candidates, top_k))
        loop = wider.loop.model_copy(update={"pages_per_round": top_k})
        wider = wider.model_copy(update={"loop": loop})
        levers = self.levers
        if wider.selection != config.selection:
            levers = RoundLevers(self.store, self.encoder, config.levers, wider.selection)
        return replace(view, config=wider, levers=levers)
