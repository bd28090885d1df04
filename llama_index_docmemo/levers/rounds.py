"""The levers' one hook into the loop: a round's candidates, the question's prior, reference
propagation after an update.

Everything the levers decide lives in the pure modules of this package; this class only holds
the store and encoder I/O they need, written as steps (``step_runtime.py``) so the loop runs it with
sync or async I/O. Per-query state stays in the loop; what is kept here is the reference graph
of each document version as one scope sees it (bounded, keyed by the scope's caller and
conditions, the document and its version), which does not depend on the question. The
documents' cards are the store's (``store/points.py``), read with their schemas.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cachetools import LRUCache

from llama_index_docmemo.config import LeverSettings, SelectionSettings
from llama_index_docmemo.levers.references import (
    labelled_pages,
    mentions_labels,
    named_pages,
    reference_boosts,
)
from llama_index_docmemo.levers.statements import fuse_rankings, statement_queries
from llama_index_docmemo.memory.schema import ReferenceGraph, build_reference_graph
from llama_index_docmemo.step_runtime import Steps, either, offload, parallel
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import FieldGroup, PageHit, PageRecord, PageRef, QueryEmbedding

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.memory.belief import PageBeliefMemory
    from llama_index_docmemo.store.base import PageStore

GraphKey = tuple[str | None, tuple[str, ...], FieldGroup | None, str, str]
"""(tenant, visible ACL groups, the scope's conditions, document id, version): a graph holds
only what its scope may read, so two scopes never share one."""


def _key(scope: PageFilter, doc_id: str, version: str) -> GraphKey:
    return (scope.tenant, scope.visible_groups, scope.where, doc_id, version)


@dataclass
class QuerySearches:
    """What the searches of one query share: the first-stage depth, sized once to the query's
    scope (one estimated count a query, not one a search: on a server each is a request), and
    the searches that depend on the question only (the statements), so rounds 3.. do not
    repeat them."""

    depth: int | None = None
    statements: dict[str, list[PageHit]] = field(default_factory=dict)


class RoundLevers:
    """Applies the levers switched on to the rounds of one engine's queries (one instance per
    retriever, so reference graphs are built once per document version).

    Args:
        store: the page store (searches, page text for the reference graphs).
        encoder: encodes the levers' extra queries.
        levers / selection: the switches and the candidate search settings.
        graphs: reference graphs kept (least recently used are rebuilt when needed again).
    """

    def __init__(
        self,
        store: PageStore,
        encoder: PageEncoder,
        levers: LeverSettings,
        selection: SelectionSettings,
        *,
        graphs: int = 256,
    ) -> None:
        self.store = store
        self.encoder = encoder
        self.levers = levers
        self.selection = selection
        self._graphs: LRUCache[GraphKey, ReferenceGraph] = LRUCache(maxsize=graphs)
        self._graphs_lock = threading.Lock()  # one engine's concurrent queries share the graphs

    # -- candidates --------------------------------------------------------------------------
    def depth(self, scope: PageFilter) -> Steps[int]:
        """First-stage candidates of a search within ``scope``: ``DocMemoConfig.prefetch``, or
        the store's depth for the pages in scope (``PageStore.search_depth``)."""
        if self.selection.prefetch is not None:
            return self.selection.prefetch
        store = self.store
        return (yield either(store.search_depth, store.asearch_depth, scope))

    def search(
        self, embedding: QueryEmbedding, scope: PageFilter, depth: int, limit: int | None = None
    ) -> Steps[list[PageHit]]:
        """One candidate search of the store within ``scope``, ``depth`` candidates deep,
        ``limit`` pages (the ``candidates`` setting by default)."""
        store, cfg = self.store, self.selection
        return (
            yield either(
                store.search,
                store.asearch,
                embedding,
                limit=cfg.candidates if limit is None else limit,
                page_filter=scope,
                prefetch_limit=depth,
            )
        )

    def candidates(
        self,
        round_: int,
        question: str,
        embedding: QueryEmbedding,
        scope: PageFilter,
        searches: QuerySearches,
    ) -> Steps[list[PageHit]]:
        """The round's candidates: the query's own ranking, fused from
        ``statement_first_round`` (default 2) on with the rankings of the levers that search.
        The evaluation's first-round ranking is this method's round 1, so baselines read
        exactly what DocMemo's round 1 saw.

        ``searches`` is the query's own (its depth and statement searches); the async driver
        runs the new statement searches concurrently."""
        if searches.depth is None:
            searches.depth = yield from self.depth(scope)
        depth = searches.depth
        base = yield from self.search(embedding, scope, depth)
        levers = self.levers
        if round_ < levers.statement_first_round or not levers.searching:
            return base
        weights = {q: levers.statement_weight for q in statement_queries(question)}
        if not weights:
            return base
        cache = searches.statements
        new = [text for text in weights if text not in cache]
        if new:
            embeddings = yield offload(lambda: [self.encoder.encode_query(t) for t in new])
            found = yield parallel(*(self.search(e, scope, depth) for e in embeddings))
            cache.update(zip(new, found, strict=True))
        records: dict[PageRef, PageRecord] = {h.ref: h.record for h in base}
        others = []
        for text, weight in weights.items():
            hits = cache[text]
            others.append(({h.ref: h.score for h in hits}, weight))
            records.update({h.ref: h.record for h in hits if h.ref not in records})
        fused = fuse_rankings({h.ref: h.score for h in base}, others, levers.fusion_rule)
        return [PageHit(records[ref], score) for ref, score in fused.items()]

    # -- beliefs -----------------------------------------------------------------------------
    def question_prior(
        self,
        beliefs: PageBeliefMemory,
        question: str,
        doc_pages: dict[str, int],
        versions: dict[str, str],
        scope: PageFilter,
    ) -> Steps[None]:
        """alpha += ``question_reference_weight`` for the pages the question names ("page 25",
        "the cover", "Figure 9") in each document of ``doc_pages`` (doc -> page count)."""
        weight = self.levers.question_reference_weight
        if weight <= 0:
            return
        labels = mentions_labels(question)
        boosts: dict[PageRef, float] = {}
        for doc_id, n_pages in doc_pages.items():
            pages = named_pages(question, n_pages)
            if labels and doc_id in versions:
                graph = yield from self.reference_graph(doc_id, versions[doc_id], scope)
                pages += labelled_pages(question, graph)
            for page in dict.fromkeys(pages):
                boosts[PageRef(doc_id, page)] = weight
        beliefs.add_alpha(boosts)

    def after_update(
        self,
        beliefs: PageBeliefMemory,
        useful: Sequence[PageRef],
        versions: dict[str, str],
        scope: PageFilter,
    ) -> Steps[None]:
        """Spread a round's useful labels along the documents' reference graphs."""
        levers = self.levers
        if not useful or (levers.reference_weight <= 0 and not levers.continuation_weight):
            return
        graphs = {}
        for doc_id in sorted({r.doc_id for r in useful}):
            if doc_id in versions:
                graphs[doc_id] = yield from self.reference_graph(doc_id, versions[doc_id], scope)
        beliefs.add_alpha(
            reference_boosts(
                useful,
                graphs,
                weight=levers.reference_weight,
                continuation_weight=levers.continuation_weight,
            )
        )

    def reference_graph(
        self, doc_id: str, version: str, scope: PageFilter
    ) -> Steps[ReferenceGraph]:
        """The document's reference graph, built once per version and scope from its stored
        page text (only from pages ``scope`` may read: a graph of a document the caller cannot
        see is empty and never kept)."""
        key = _key(scope, doc_id, version)
        with self._graphs_lock:
            graph = self._graphs.get(key)
        if graph is not None:
            return graph
        store = self.store
        schema = yield either(store.get_schema, store.aget_schema, doc_id, tenant=scope.tenant)
        n_pages = schema.n_pages if schema is not None else 0
        refs = [PageRef(doc_id, p) for p in range(1, n_pages + 1)]
        records = (yield either(store.get_pages, store.aget_pages, refs, scope)) if refs else []
        texts = {r.page: r.text for r in records if r.doc_version == version}
        graph = yield offload(build_reference_graph, texts)
        if texts:
            with self._graphs_lock:
                self._graphs[key] = graph
        return graph
