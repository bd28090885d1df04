"""The server page store: a Qdrant server or cluster through qdrant-client (sync and async).

``path=`` / ``location=":memory:"`` run qdrant-client's local mode instead, a pure-Python
test double of the server API: the same requests, about 100x slower than Qdrant Edge.
Every request is built once (:mod:`.client_requests`) and sent by a sync or an async driver,
each with the same bounded retries (tenacity).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qdrant_client import AsyncQdrantClient, QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.faults import fault_point
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store._qdrant import QdrantLayoutStore
from llama_index_docmemo.store.client_requests import Request, Routing, request_for, vectors_config
from llama_index_docmemo.store.layouts import DEFAULT_LAYOUT, LEXICAL, MultivectorLayout
from llama_index_docmemo.store.operations import Fusion, IdfScope
from llama_index_docmemo.store.points import check_name

_RETRY_STATUS = frozenset({429, 502, 503, 504})
SHARED_SHARD_KEY = "docmemo-shared"
"""The shard key of every tenant without one of its own (custom sharding)."""
INDEXING_THRESHOLD_KB = 20_000
"""Qdrant's default: segments larger than this get their HNSW index built."""


def _transient(exc: BaseException) -> bool:
    """Worth retrying: the server did not answer, or answered that it is busy."""
    if isinstance(exc, ResponseHandlingException):
        return True
    return isinstance(exc, UnexpectedResponse) and exc.status_code in _RETRY_STATUS


class QdrantClientPageStore(QdrantLayoutStore):
    """Pages in one collection of a Qdrant server/cluster (``url=``) or of qdrant-client's local mode.

    Args:
        url / api_key: the server; every call has ``timeout`` seconds and up to ``retries``
            attempts on transient failures (no answer, 429, 502-504). Writes wait for the
            result with strong ordering, so a version's stale pages are deleted after the new
            ones are in, on every replica.
        path / location: local mode on disk / ``":memory:"`` (test double of the server API).
        collection: collection name; created on first use with the layout's vectors, the
            payload indexes (the tenant field with ``is_tenant=true``) and the cluster settings.
        shard_number / replication_factor / write_consistency_factor: the collection's cluster
            settings (Qdrant's meaning; with tenant shard keys, ``shard_number`` is per key).
        tenant_shard_keys: tenants large enough for a shard key of their own (Qdrant's custom
            sharding): every read and write of such a tenant names its key, the other tenants
            share one key. Fixed at creation (a tenant's points cannot move keys afterwards).
        quantization_config: collection-wide quantization (the layout's own is per vector).
        encoder_name / dim / sparse / encoder_settings / fusion / idf_scope / layout /
            default_layout: as for :class:`EdgePageStore` (no encoder: the collection's own).

    Raises:
        StoreError: the server does not answer, or the collection was created with another
            encoder, layout or shard keys, or is not a docmemo page store.
    """

    max_batch_points = 64
    max_batch_bytes = 8 << 20  # of vectors: JSON is ~3x that, and Qdrant refuses requests > 32 MB

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        path: str | Path | None = None,
        location: str | None = None,
        collection: str = "docmemo_pages",
        encoder_name: str | None = None,
        dim: int | None = None,
        sparse: bool = False,
        encoder_settings: dict[str, Any] | None = None,
        fusion: Fusion = "rrf",
        idf_scope: IdfScope = "filter",
        layout: MultivectorLayout | None = None,
        default_layout: MultivectorLayout = DEFAULT_LAYOUT,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        tenant_shard_keys: Sequence[str] | None = None,
        quantization_config: models.QuantizationConfig | None = None,
        timeout: int = 30,
        retries: int = 3,
    ) -> None:
        super().__init__(
            encoder_name=encoder_name,
            dim=dim,
            sparse=sparse,
            fusion=fusion,
            idf_scope=idf_scope,
            layout=layout,
            default_layout=default_layout,
            encoder_settings=encoder_settings,
        )
        if sum(x is not None for x in (url, path, location)) != 1:
            raise StoreError(
                "give exactly one of url=, path= or location= for a Qdrant client store"
            )
        if tenant_shard_keys and url is None:
            raise StoreError(
                "tenant_shard_keys need a Qdrant server (url=): local mode has no shards"
            )
        for tenant in tenant_shard_keys or ():
            try:
                check_name("tenant", tenant)
            except ValueError as exc:
                raise StoreError(f"tenant_shard_keys: {exc}") from exc
        self.collection = collection
        self.timeout = timeout
        self.retries = max(1, retries)
        self.remote = url is not None
        self._url = url
        self._api_key = api_key
        self._where = url or (str(path) if path is not None else str(location))
        self._routing: Routing | None = None
        self._client: QdrantClient | None = QdrantClient(
            url=url,
            api_key=api_key,
            path=str(path) if path is not None else None,
            location=location,
            timeout=timeout,
        )
        self._aclient: AsyncQdrantClient | None = None
        try:
            self._open(
                {
                    "shard_number": shard_number,
                    "replication_factor": replication_factor,
                    "write_consistency_factor": write_consistency_factor,
                    "quantization_config": quantization_config,
                },
                tenant_shard_keys,
            )
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
            "encoder_settings": self.encoder_settings,
            "fusion": self.fusion,
            "idf_scope": self.idf_scope,
            "layout": self.layout,
            "timeout": self.timeout,
            "retries": self.retries,
        }

    @property
    def client(self) -> QdrantClient:
        if self._client is None:
            raise StoreError(f"{self.location} is closed")
        return self._client

    # ------------------------------------------------------------ drivers

    def _retry_options(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.retries),
            "wait": wait_exponential(multiplier=0.5, max=8),
            "retry": retry_if_exception(_transient),
            "reraise": True,
        }

    def _failure(self, what: str, exc: Exception) -> StoreError:
        return StoreError(f"{what} on {self.location} failed: {exc}")

    def _request(self, request: Request) -> Any:
        """One call on the sync client, retried on transient failures."""
        method = getattr(self.client, request.method)
        try:
            for attempt in Retrying(**self._retry_options()):
                with attempt:
                    reply = method(self.collection, **request.kwargs)
        except (ResponseHandlingException, UnexpectedResponse) as exc:
            raise self._failure(request.what, exc) from exc
        return request.parse(reply)

    def _execute(self, operation: op.Operation) -> Any:
        reply = self._request(request_for(operation, routing=self._routing, timeout=self.timeout))
        if isinstance(operation, op.Commit):  # one request took the document past both steps
            fault_point("record-written")
            fault_point("stale-deleted")
        return reply

    async def _arequest(self, request: Request) -> Any:
        """One call on the async client, with the sync driver's retries."""
        if self._aclient is None:
            self._aclient = AsyncQdrantClient(
                url=self._url, api_key=self._api_key, timeout=self.timeout
            )
        method = getattr(self._aclient, request.method)
        try:
            async for attempt in AsyncRetrying(**self._retry_options()):
                with attempt:
                    reply = await method(self.collection, **request.kwargs)
        except (ResponseHandlingException, UnexpectedResponse) as exc:
            raise self._failure(request.what, exc) from exc
        return request.parse(reply)

    async def _aexecute(self, operation: op.Operation) -> Any:
        """Native async on a server (the request :meth:`_execute` sends); local mode (one
        in-process store) runs in a thread."""
        if not self.remote:
            return await super()._aexecute(operation)
        return await self._arequest(
            request_for(operation, routing=self._routing, timeout=self.timeout)
        )

    # ------------------------------------------------------------ the collection

    def _open(self, cluster: dict[str, Any], tenant_shard_keys: Sequence[str] | None) -> None:
        exists = self._request(Request("checking the collection", "collection_exists", {}, bool))
        if exists:
            self._adopt_routing(tenant_shard_keys)
            run(self._open_steps())
            if not self.remote:
                self.recover()  # local mode: this process owns the folder
            return
        if self.adopts_encoder:
            raise self._no_store()
        dedicated = sorted(set(tenant_shard_keys or ()))
        create = {
            "vectors_config": vectors_config(self.dim, self.layout),
            "sparse_vectors_config": (
                {LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)}
                if self.sparse
                else None
            ),
            "optimizers_config": models.OptimizersConfigDiff(
                indexing_threshold=INDEXING_THRESHOLD_KB
            ),
            "sharding_method": models.ShardingMethod.CUSTOM if tenant_shard_keys else None,
            "timeout": self.timeout,
            **cluster,
        }
        try:
            self._request(Request("creating the collection", "create_collection", create))
        except StoreError:
            # another process created it between our check and our create: use theirs
            if not self._request(Request("checking the collection", "collection_exists", {}, bool)):
                raise
            self._adopt_routing(tenant_shard_keys)
            run(self._open_steps())
            return
        if tenant_shard_keys:
            self._routing = Routing(frozenset(dedicated), SHARED_SHARD_KEY)
            for key in (SHARED_SHARD_KEY, *dedicated):
                options = {
                    "shard_key": key,
                    "shards_number": cluster["shard_number"],
                    "replication_factor": cluster["replication_factor"],
                }
                self._request(Request(f"creating shard key {key!r}", "create_shard_key", options))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            run(self._create_steps())

    def _adopt_routing(self, tenant_shard_keys: Sequence[str] | None) -> None:
        """An existing collection's shard keys: taken as they are, checked against the request."""
        info = self._request(Request("reading the collection", "get_collection", {}))
        if info.config.params.sharding_method != models.ShardingMethod.CUSTOM:
            if tenant_shard_keys:
                raise StoreError(
                    f"{self.location} was created without tenant shard keys: it cannot take "
                    f"tenant_shard_keys={list(tenant_shard_keys)} (index into a new collection)"
                )
            return
        stored = self._request(Request("reading the shard keys", "list_shard_keys", {}))
        keys = {str(k.key) for k in stored.shard_keys or []} - {SHARED_SHARD_KEY}
        if tenant_shard_keys is not None and set(tenant_shard_keys) != keys:
            raise StoreError(
                f"{self.location} has shard keys for tenants {sorted(keys)}, not "
                f"{sorted(set(tenant_shard_keys))}: a tenant's points cannot move keys"
            )
        self._routing = Routing(frozenset(keys), SHARED_SHARD_KEY)

    def _begin_bulk_load(self) -> None:
        """Qdrant's bulk-load advice: no HNSW building while the points stream in."""
        self._set_indexing(0)

    def _end_bulk_load(self) -> None:
        """The threshold the collection was created with (never one another loader left)."""
        self._set_indexing(INDEXING_THRESHOLD_KB)

    def _set_indexing(self, threshold: int) -> None:
        if not self.remote:
            return  # local mode has no indexes to defer
        config = models.OptimizersConfigDiff(indexing_threshold=threshold)
        self._request(
            Request(
                "setting the indexing threshold",
                "update_collection",
                {"optimizers_config": config, "timeout": self.timeout},
            )
        )

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
