"""The server page store: a Qdrant server or cluster through qdrant-client (sync and async).

``path=`` / ``location=":memory:"`` run qdrant-client's local mode instead, a pure-Python
test double of the server API: the same requests, about 100x slower than Qdrant Edge.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from qdrant_client import AsyncQdrantClient, QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store import _layout as L
from llama_index_docmemo.store._qdrant import _REFILL_ROUNDS, QdrantLayoutStore
from llama_index_docmemo.store.filters import client_filter
from llama_index_docmemo.types import PageFilter, PageHit, QueryEmbedding

T = TypeVar("T")

_RETRY_STATUS = frozenset({429, 502, 503, 504})
_SCROLL_PAGE = 256


def _backoff(attempt: int) -> float:
    return 0.5 * 2 ** (attempt - 1)


def _transient(exc: Exception) -> bool:
    """Worth retrying: the server did not answer, or answered that it is busy."""
    if isinstance(exc, ResponseHandlingException):
        return True
    return isinstance(exc, UnexpectedResponse) and exc.status_code in _RETRY_STATUS


def _condition(condition: L.Condition) -> models.FieldCondition:
    values = list(condition.values)
    match: models.MatchValue | models.MatchAny = (
        models.MatchValue(value=values[0]) if len(values) == 1 else models.MatchAny(any=values)
    )
    return models.FieldCondition(key=condition.key, match=match)


def _filter(where: L.FilterSpec) -> models.Filter:
    must: list[Any] = [_condition(c) for c in where.must]
    must += [client_filter(g) for g in where.groups]
    must += [models.IsEmptyCondition(is_empty=models.PayloadField(key=k)) for k in where.empty]
    return models.Filter(
        must=must,
        must_not=[_condition(c) for c in where.must_not] or None,
    )


def _point(point: L.PointData) -> models.PointStruct:
    vectors: dict[str, Any] = dict(point.dense)
    if point.sparse is not None:
        vectors[L.LEXICAL] = models.SparseVector(
            indices=list(point.sparse.indices), values=list(point.sparse.values)
        )
    return models.PointStruct(id=point.id, vector=vectors, payload=point.payload)


def _vectors_config(dim: int) -> dict[str, models.VectorParams]:
    """Named vectors of the layout; no HNSW graph on the multivector (MaxSim reranks only)."""
    return {
        L.MULTI: models.VectorParams(
            size=dim,
            distance=models.Distance.COSINE,
            multivector_config=models.MultiVectorConfig(
                comparator=models.MultiVectorComparator.MAX_SIM
            ),
            hnsw_config=models.HnswConfigDiff(m=0),
        ),
        L.POOLED: models.VectorParams(size=dim, distance=models.Distance.COSINE),
    }


def _index_schema(kind: str, is_tenant: bool) -> Any:
    if kind == "integer":
        return models.PayloadSchemaType.INTEGER
    if is_tenant:
        return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
    return models.PayloadSchemaType.KEYWORD


def branch_requests(plan: L.SearchPlan) -> list[dict[str, Any]]:
    """``query_points`` keyword arguments of each branch (dense, then lexical if any), the same for
    the sync and async client; :func:`_layout.fuse_branches` fuses their answers deterministically."""
    where = _filter(plan.where)
    vectors = plan.vectors
    first_stage = models.Prefetch(
        query=vectors.pooled, using=L.POOLED, limit=plan.prefetch, filter=where
    )
    requests: list[dict[str, Any]] = [
        {
            "query": vectors.multi,
            "using": L.MULTI,
            "prefetch": [first_stage],
            "query_filter": where,
            "limit": plan.prefetch,
            "with_payload": True,
        }
    ]
    if vectors.sparse is not None:
        idf = (
            models.SearchParams(idf=models.IdfCorpusParams(corpus=where))
            if plan.idf_scope == "filter"
            else None
        )
        requests.append(
            {
                "query": models.SparseVector(
                    indices=list(vectors.sparse.indices), values=list(vectors.sparse.values)
                ),
                "using": L.LEXICAL,
                "query_filter": where,
                "limit": plan.prefetch,
                "search_params": idf,
                "with_payload": True,
            }
        )
    return requests


def feedback_request(plan: L.FeedbackPlan) -> dict[str, Any]:
    """Keyword arguments of ``query_points`` for a recommend / discovery plan."""
    query: models.DiscoverQuery | models.RecommendQuery
    if plan.target is not None and plan.negatives:
        query = models.DiscoverQuery(
            discover=models.DiscoverInput(
                target=plan.target,
                context=[models.ContextPair(positive=p, negative=n) for p, n in plan.context_pairs],
            )
        )
    else:
        query = models.RecommendQuery(
            recommend=models.RecommendInput(
                positive=plan.positives,
                negative=plan.negatives or None,
                strategy=models.RecommendStrategy(plan.strategy),
            )
        )
    return {
        "query": query,
        "using": plan.using,
        "query_filter": _filter(plan.where),
        "limit": plan.limit,
        "with_payload": True,
    }


class QdrantClientPageStore(QdrantLayoutStore):
    """Pages in one collection of a Qdrant server/cluster (``url=``) or of qdrant-client's local mode.

    Args:
        url / api_key: the server; every call has ``timeout`` seconds and up to ``retries``
            attempts on transient failures (no answer, 429, 502-504). Writes wait for the
            result with strong ordering, so a version's stale pages are deleted after the new
            ones are in, on every replica.
        path / location: local mode on disk / ``":memory:"`` (test double of the server API).
        collection: collection name; created on first use with the layout's vectors and
            payload indexes, and with ``shard_number`` / ``replication_factor`` /
            ``quantization_config`` when given.
        encoder_name / dim / sparse / fusion / idf_scope: as for :class:`EdgePageStore`.

    Raises:
        StoreError: the server does not answer, or the collection was created with another
            encoder or is not a docmemo page store.
    """

    write_batch = 16  # a ColQwen page is ~1 MB of JSON: keep requests small

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        path: str | Path | None = None,
        location: str | None = None,
        collection: str = "docmemo_pages",
        encoder_name: str,
        dim: int,
        sparse: bool = False,
        fusion: L.Fusion = "rrf",
        idf_scope: L.IdfScope = "filter",
        shard_number: int | None = None,
        replication_factor: int | None = None,
        quantization_config: models.QuantizationConfig | None = None,
        timeout: int = 30,
        retries: int = 3,
    ) -> None:
        super().__init__(
            encoder_name=encoder_name, dim=dim, sparse=sparse, fusion=fusion, idf_scope=idf_scope
        )
        if sum(x is not None for x in (url, path, location)) != 1:
            raise StoreError(
                "give exactly one of url=, path= or location= for a Qdrant client store"
            )
        self.collection = collection
        self.timeout = timeout
        self.retries = max(1, retries)
        self.remote = url is not None
        self.exclusive = not self.remote  # local mode locks its folder to this process
        self._url = url
        self._api_key = api_key
        self._where = url or (str(path) if path is not None else str(location))
        self._client: QdrantClient | None = QdrantClient(
            url=url,
            api_key=api_key,
            path=str(path) if path is not None else None,
            location=location,
            timeout=timeout,
        )
        self._aclient: AsyncQdrantClient | None = None
        self._ordering = models.WriteOrdering.STRONG
        try:
            self._open(shard_number, replication_factor, quantization_config)
        except StoreError:
            self.close()  # release the local-mode folder lock for a retry in this process
            raise

    @property
    def location(self) -> str:
        return f"Qdrant collection '{self.collection}' at {self._where}"

    def reopen_options(self) -> dict[str, Any]:
        """Keyword arguments that open this same collection again in another process (a Ray
        worker writing in parallel); a server collection only."""
        if not self.remote:
            raise StoreError(f"{self.location} is in local mode: only this process may open it")
        return {
            "url": self._url,
            "api_key": self._api_key,
            "collection": self.collection,
            "encoder_name": self.encoder_name,
            "dim": self.dim,
            "sparse": self.sparse,
            "fusion": self.fusion,
            "idf_scope": self.idf_scope,
            "timeout": self.timeout,
            "retries": self.retries,
        }

    @property
    def client(self) -> QdrantClient:
        if self._client is None:
            raise StoreError(f"{self.location} is closed")
        return self._client

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` with bounded retries on transient failures; other failures name the store."""
        attempt = 1
        while True:
            try:
                return fn(*args, **kwargs)
            except (ResponseHandlingException, UnexpectedResponse) as exc:
                if not _transient(exc) or attempt >= self.retries:
                    raise StoreError(f"{what} on {self.location} failed: {exc}") from exc
            time.sleep(_backoff(attempt))
            attempt += 1

    def _open(
        self,
        shard_number: int | None,
        replication_factor: int | None,
        quantization_config: models.QuantizationConfig | None,
    ) -> None:
        if self._call("checking the collection", self.client.collection_exists, self.collection):
            self._check_meta()
            if not self.remote:
                self.recover()  # local mode: this process owns the folder
            return
        try:
            self._call(
                "creating the collection",
                self.client.create_collection,
                self.collection,
                vectors_config=_vectors_config(self.dim),
                sparse_vectors_config=(
                    {L.LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)}
                    if self.sparse
                    else None
                ),
                shard_number=shard_number,
                replication_factor=replication_factor,
                quantization_config=quantization_config,
                timeout=self.timeout,
            )
        except StoreError:
            # another process created it between our check and our create: use theirs
            if not self._call(
                "checking the collection", self.client.collection_exists, self.collection
            ):
                raise
            self._check_meta()
            return
        for key, kind, is_tenant in L.PAYLOAD_INDEXES:
            self._create_index(key, kind, is_tenant)
        self._write([self._meta_point()])

    def _create_index(self, key: str, kind: Literal["keyword", "integer"], is_tenant: bool) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            self._call(
                f"indexing payload field '{key}'",
                self.client.create_payload_index,
                self.collection,
                key,
                field_schema=_index_schema(kind, is_tenant),
                wait=True,
                timeout=self.timeout,
            )

    def _set_payload(self, where: L.FilterSpec, payload: dict[str, Any]) -> None:
        self._call(
            "set payload",
            self.client.set_payload,
            self.collection,
            payload=payload,
            points=models.FilterSelector(filter=_filter(where)),
            wait=True,
            ordering=self._ordering,
            timeout=self.timeout,
        )

    def _write(self, points: Sequence[L.PointData]) -> None:
        self._call(
            "upsert",
            self.client.upsert,
            self.collection,
            points=[_point(p) for p in points],
            wait=True,
            ordering=self._ordering,
            timeout=self.timeout,
        )

    def _delete(self, where: L.FilterSpec) -> None:
        self._call(
            "delete",
            self.client.delete,
            self.collection,
            points_selector=models.FilterSelector(filter=_filter(where)),
            wait=True,
            ordering=self._ordering,
            timeout=self.timeout,
        )

    def _scroll(
        self, where: L.FilterSpec, fields: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        payloads: list[dict[str, Any]] = []
        offset: Any = None
        while True:
            records, offset = self._call(
                "scroll",
                self.client.scroll,
                self.collection,
                scroll_filter=_filter(where),
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=list(fields) if fields is not None else True,
                with_vectors=False,
                timeout=self.timeout,
            )
            payloads.extend(r.payload or {} for r in records)
            if offset is None:
                return payloads

    def _count(self, where: L.FilterSpec) -> int:
        result = self._call(
            "count",
            self.client.count,
            self.collection,
            count_filter=_filter(where),
            exact=True,
            timeout=self.timeout,
        )
        return result.count

    def _retrieve(self, point_id: str) -> dict[str, Any] | None:
        records = self._call(
            "retrieve",
            self.client.retrieve,
            self.collection,
            ids=[point_id],
            with_payload=True,
            with_vectors=False,
            timeout=self.timeout,
        )
        return (records[0].payload or {}) if records else None

    def _query(self, plan: L.SearchPlan) -> list[tuple[dict[str, Any], float]]:
        branches = [
            self._call(
                "search", self.client.query_points, self.collection, **request, timeout=self.timeout
            ).points
            for request in branch_requests(plan)
        ]
        return L.fuse_branches(
            [[(p.payload or {}, p.score) for p in branch] for branch in branches], plan
        )

    def _vectors(self, point_ids: Sequence[str], using: str) -> dict[str, L.Vector]:
        if not point_ids:
            return {}
        records = self._call(
            "retrieve",
            self.client.retrieve,
            self.collection,
            ids=list(point_ids),
            with_payload=False,
            with_vectors=[using],
            timeout=self.timeout,
        )
        out: dict[str, L.Vector] = {}
        for record in records:
            vector = record.vector
            if isinstance(vector, dict) and using in vector:
                out[str(record.id)] = vector[using]  # type: ignore[assignment]
        return out

    def _feedback_query(self, plan: L.FeedbackPlan) -> list[tuple[dict[str, Any], float]]:
        response = self._call(
            "feedback search",
            self.client.query_points,
            self.collection,
            **feedback_request(plan),
            timeout=self.timeout,
        )
        return [(p.payload or {}, p.score) for p in response.points]

    async def asearch(
        self,
        query: QueryEmbedding,
        *,
        limit: int,
        page_filter: PageFilter | None = None,
        prefetch_limit: int | None = None,
    ) -> list[PageHit]:
        """Native async search on a server; local mode (one in-process store) runs in a thread."""
        if not self.remote:
            return await super().asearch(
                query, limit=limit, page_filter=page_filter, prefetch_limit=prefetch_limit
            )
        plan = self._plan(query, limit, page_filter, prefetch_limit)
        if L.matches_nothing(page_filter):
            return []
        if self._aclient is None:
            self._aclient = AsyncQdrantClient(
                url=self._url, api_key=self._api_key, timeout=self.timeout
            )
        client = self._aclient
        wider: L.SearchPlan | None = plan
        kept: list[tuple[dict[str, Any], float]] = []
        for _ in range(_REFILL_ROUNDS):
            if wider is None:
                break
            branches = [await self._abranch(client, request) for request in branch_requests(wider)]
            scored = L.fuse_branches(branches, wider)
            kept, wider = await asyncio.to_thread(self._visible_hits, wider, scored)
        return self._hits(kept[:limit])

    async def _abranch(
        self, client: AsyncQdrantClient, request: dict[str, Any]
    ) -> list[tuple[dict[str, Any], float]]:
        """One branch on the async client, with the sync path's bounded retries."""
        attempt = 1
        while True:
            try:
                response = await client.query_points(
                    self.collection, **request, timeout=self.timeout
                )
                return [(p.payload or {}, p.score) for p in response.points]
            except (ResponseHandlingException, UnexpectedResponse) as exc:
                if not _transient(exc) or attempt >= self.retries:
                    raise StoreError(f"search on {self.location} failed: {exc}") from exc
            await asyncio.sleep(_backoff(attempt))
            attempt += 1

    async def aclose(self) -> None:
        """Close the async client (if one was opened) and the sync one."""
        if self._aclient is not None:
            await self._aclient.close()
            self._aclient = None
        self.close()

    def close(self) -> None:
        """Release the client; call :meth:`aclose` instead after async searches in a running loop."""
        if self._aclient is not None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                asyncio.run(self._aclient.close())
            self._aclient = None
        if self._client is not None:
            self._client.close()
            self._client = None
