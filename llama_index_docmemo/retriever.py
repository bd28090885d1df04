"""DocMemoRetriever: a thin ``BaseRetriever``, a view of round 1 over the engine's runner.

``retrieve()`` runs the first round of a fresh query (:func:`~llama_index_docmemo.loop.first_round`)
over its :class:`~llama_index_docmemo.loop.DocMemoRunner` and returns the pages it selects
(``similarity_top_k`` of them). The runner owns the parts (store, encoder, config, reranker,
levers, executors); the retriever adds the caller's scope.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor
from dataclasses import replace
from typing import TYPE_CHECKING

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.loop.query import first_round
from llama_index_docmemo.loop.runner import DocMemoRunner
from llama_index_docmemo.step_runtime import arun, cpu_executor, run
from llama_index_docmemo.store.scope import PageFilter, ScopeLike, caller, has_key

if TYPE_CHECKING:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.levers.rounds import RoundLevers
    from llama_index_docmemo.store.base import PageStore

__all__ = ["DocMemoRetriever", "ScopeLike"]

logger = logging.getLogger(__name__)

MAX_TOP_K = 1000
"""The most pages ``retrieve`` returns: the most candidates a round may search."""


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
            analysis); default: the process's CPU thread (see :mod:`llama_index_docmemo.step_runtime`),
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
        config = config or DocMemoConfig()
        runner = DocMemoRunner.build(
            store,
            encoder,
            config,
            reranker=reranker,
            callback_manager=self.callback_manager,
            cpu=cpu_executor,
        )
        self._view(runner, page_filter, similarity_top_k)

    @classmethod
    def over(
        cls,
        runner: DocMemoRunner,
        page_filter: ScopeLike = None,
        similarity_top_k: int | None = None,
        verbose: bool = False,
    ) -> DocMemoRetriever:
        """A retriever over ``runner``'s parts (no parts of its own: the levers' caches are the
        runner's), scoped to ``page_filter``."""
        retriever = cls.__new__(cls)
        BaseRetriever.__init__(retriever, callback_manager=runner.callback_manager, verbose=verbose)
        retriever._view(runner, page_filter, similarity_top_k)
        return retriever

    def _view(
        self, runner: DocMemoRunner, page_filter: ScopeLike, similarity_top_k: int | None
    ) -> None:
        if similarity_top_k is not None and not 1 <= similarity_top_k <= MAX_TOP_K:
            raise ValueError(f"similarity_top_k must be in 1..{MAX_TOP_K}, got {similarity_top_k}")
        self.runner = runner
        self.page_filter = caller(page_filter)
        warn_unknown_keys(runner.store, self.page_filter)
        self.similarity_top_k = similarity_top_k
        self._round1 = runner.first_round(similarity_top_k)

    # -- the runner's parts, by the names a LlamaIndex retriever has --------------------------
    @property
    def store(self) -> PageStore:
        return self.runner.store

    @property
    def encoder(self) -> PageEncoder:
        return self.runner.encoder

    @property
    def config(self) -> DocMemoConfig:
        return self.runner.config

    @property
    def reranker(self) -> BaseNodePostprocessor | None:
        return self.runner.reranker

    @property
    def levers(self) -> RoundLevers:
        return self.runner.levers

    @property
    def cpu_executor(self) -> Executor | None:
        return self.runner.cpu

    # -- BaseRetriever hooks ------------------------------------------------------------------
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return run(first_round(self._round1, query_bundle.query_str, self.page_filter))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        with cpu_executor(self.runner.cpu):
            steps = first_round(self._round1, query_bundle.query_str, self.page_filter)
            return await arun(steps)

    def __repr__(self) -> str:
        return f"DocMemoRetriever(encoder={self.encoder.name!r}, config={self.config!r})"
