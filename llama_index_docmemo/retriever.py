"""DocMemoRetriever: a thin ``BaseRetriever`` over the loop's selection step.

``retrieve()`` starts a fresh :class:`~llama_index_docmemo.loop.DocMemoLoop` for the query and
returns the pages its first round selects (``similarity_top_k`` of them). It also holds what
every query of an engine shares (store, encoder, config, scope, reranker, the levers' reference
graphs); the query engine runs the full loop from it.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.blocking import blocking_pool, cpu_executor
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.levers.rounds import RoundLevers
from llama_index_docmemo.loop import DocMemoLoop, LoopParts
from llama_index_docmemo.loop.reading import selected_nodes
from llama_index_docmemo.step_runtime import arun, run
from llama_index_docmemo.store.scope import PageFilter, ScopeLike, caller, has_key

if TYPE_CHECKING:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.store.base import PageStore

__all__ = ["DocMemoRetriever", "ScopeLike"]

logger = logging.getLogger(__name__)

MAX_TOP_K = 1000
"""The most pages ``retrieve`` returns: the most candidates a round may search."""


def _first_round_config(config: DocMemoConfig, top_k: int | None) -> DocMemoConfig:
    """What ``retrieve`` runs: one round choosing ``top_k`` pages among at least as many
    candidates. It reads nothing, so ``top_k`` is not bound by the reading cap of
    ``pages_per_round`` (50 pages a reader is shown at once)."""
    if top_k is None:
        return config
    wider = config.updated(candidates=max(config.selection.candidates, top_k))
    loop = wider.loop.model_copy(update={"pages_per_round": top_k})
    return wider.model_copy(update={"loop": loop})


def warn_unknown_keys(store: PageStore, scope: PageFilter) -> list[str]:
    """Name the filter's metadata keys that no page the caller may read holds (a misspelt key
    would otherwise look like a missing answer); returns them."""
    keys = scope.metadata_keys()
    reach = PageFilter(doc_ids=scope.doc_ids, tenant=scope.tenant, acl_groups=scope.acl_groups)
    missing = [k for k in keys if store.count_pages(replace(reach, where=has_key(k))) == 0]
    if missing:
        logger.warning(
            "filter on metadata key %s: no document in scope has %s, so the filter matches no "
            "page (check the spelling, or index the documents with that key)",
            ", ".join(repr(k) for k in missing),
            "it" if len(missing) == 1 else "them",
        )
    return missing


class DocMemoRetriever(BaseRetriever):
    """Candidate search on the page store + selection by (1 - lambda) c + lambda theta.

    Args:
        store: the page store (Qdrant Edge or qdrant-client).
        encoder: the encoder that filled the store.
        config: loop parameters and ablation switches.
        page_filter: the caller and its scope, applied inside Qdrant on every call: a
            ``PageFilter`` sets the tenant and ACL groups; ``MetadataFilters`` only narrow (a
            caller without a tenant; see :mod:`llama_index_docmemo.store.scope`).
        reranker: any node postprocessor reordering each round's candidates.
        similarity_top_k: pages ``retrieve`` returns (default: ``pages_per_round``); the
            engine's rounds read ``pages_per_round`` pages each.
        cpu_executor: where async queries run GIL-holding work (page renders, layout
            analysis); default: the process's CPU thread (see :mod:`llama_index_docmemo.blocking`),
            or pass an executor of the app's own, e.g. a ``ProcessPoolExecutor``.
    """

    def __init__(
        self,
        store: PageStore,
        encoder: PageEncoder,
        config: DocMemoConfig | None = None,
        page_filter: ScopeLike = None,
        reranker: BaseNodePostprocessor | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        similarity_top_k: int | None = None,
        cpu_executor: Executor | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        if getattr(store, "encoder_name", encoder.name) != encoder.name:
            raise StoreError(
                f"the store was built with encoder {store.encoder_name!r}, "
                f"but the retriever was given {encoder.name!r}"
            )
        if similarity_top_k is not None and not 1 <= similarity_top_k <= MAX_TOP_K:
            raise ValueError(f"similarity_top_k must be in 1..{MAX_TOP_K}, got {similarity_top_k}")
        self.store = store
        self.encoder = encoder
        self.config = config or DocMemoConfig()
        self.page_filter = caller(page_filter)
        warn_unknown_keys(store, self.page_filter)
        self.reranker = reranker
        self.similarity_top_k = similarity_top_k
        self._retrieve_config = _first_round_config(self.config, similarity_top_k)
        self.levers = RoundLevers(store, encoder, self.config.levers, self.config.selection)
        self.cpu_executor = cpu_executor
        wider = self._retrieve_config.selection
        self._retrieve_levers = (  # retrieve()'s candidates: at least similarity_top_k
            self.levers
            if wider == self.config.selection
            else RoundLevers(store, encoder, self.config.levers, wider)
        )

    def loop_parts(self, **overrides: Any) -> LoopParts:
        """The shared components of a loop over this retriever's store (``overrides`` add a
        reader, crops, callbacks...)."""
        parts = LoopParts(
            store=self.store,
            encoder=self.encoder,
            config=self.config,
            levers=self.levers,
            reranker=self.reranker,
            callback_manager=self.callback_manager,
            round_events=False,  # BaseRetriever.retrieve fires them itself
            cpu=self.cpu_executor,
            calls=blocking_pool(),  # asked each query: a forked worker gets its own
        )
        return replace(parts, **overrides)

    def _first_round(self, question: str) -> DocMemoLoop:
        parts = self.loop_parts(config=self._retrieve_config, levers=self._retrieve_levers)
        return DocMemoLoop(parts, question, self.page_filter)

    # -- BaseRetriever hooks ------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        loop = self._first_round(query_bundle.query_str)
        return selected_nodes(loop.snapshot(), run(loop.select()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        loop = self._first_round(query_bundle.query_str)
        with cpu_executor(self.cpu_executor):
            return selected_nodes(loop.snapshot(), await arun(loop.select()))

    def __repr__(self) -> str:
        return f"DocMemoRetriever(encoder={self.encoder.name!r}, config={self.config!r})"
