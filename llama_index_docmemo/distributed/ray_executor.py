"""RayExecutor: indexing spread over a Ray cluster, with the serial indexer's guarantees.

Per document: a parse task (parse, OCR, schema; one CPU) -> an encoder actor (render, encode;
``num_gpus`` when asked) -> the write. To a Qdrant server each actor upserts its documents
itself (the pool writes in parallel, in the store's batches); to an embedded store, which one
process owns, this process is the single writer. Each write is the store's own crash-safe
upsert (journal, pages, record, old version out) with deterministic point ids, so a step that
Ray re-runs after a worker died overwrites what the dead one wrote; a search never sees a
half-written document meanwhile. A document that still fails after Ray's retries is reported
with the reason, and every other document is indexed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from llama_index_docmemo._extras import require
from llama_index_docmemo.distributed.schedule import QUEUED_PER_ACTOR, Schedule
from llama_index_docmemo.distributed.workers import EncoderFactory, EncodeWorker
from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.indexing.executors import IndexExecutor
from llama_index_docmemo.indexing.stages import DocumentJob, DocumentOutcome

if TYPE_CHECKING:
    from types import ModuleType

    from llama_index_docmemo.encoders.base import PageEncoder
    from llama_index_docmemo.indexing.indexer import DocumentIndexer
    from llama_index_docmemo.store.base import PageStore


_FEATURE = "indexing on a Ray cluster"


def _server_options(store: PageStore) -> dict[str, Any] | None:
    """How a worker opens the same server collection, or None for a store only this process
    may write (an embedded folder, or qdrant-client's local mode)."""
    from llama_index_docmemo.store.client import QdrantClientPageStore

    if isinstance(store, QdrantClientPageStore) and store.remote:
        return store.reopen_options()
    return None


class RayExecutor(IndexExecutor):
    """Runs the indexer's steps on a Ray cluster (extra ``ray``).

    Args:
        address: "auto" (the cluster in ``$RAY_ADDRESS`` or the last one ``ray start`` ran on
            this machine, else a new local one), "local" (always a new local one), or a
            cluster address ("ray://head:10001", "head:6379"). Ignored when this process is
            already connected (``ray.init`` called by the application: its cluster and
            runtime env are used, and left running).
        workers: encoder actors; default one per ``gpus_per_worker`` GPUs of the cluster, else 1.
        gpus_per_worker: GPUs each actor reserves (fractions share a GPU); 0 for CPU encoders,
            whose actors then reserve no core and share the CPUs with the parse tasks.
        encoder: builds the encoder in each actor (a picklable zero-argument callable); default
            ``load_encoder(<the indexer's encoder name>)``.
        max_retries: how often Ray re-runs a step whose worker died.
        write_retry_seconds: how long an actor retries a write the server refuses (backoff
            0.5 s doubling to 8 s) before the document fails and the batch stops.
        init_options: more ``ray.init`` arguments for a cluster started here (``num_cpus``,
            ``runtime_env``...).
    """

    def __init__(
        self,
        address: str = "auto",
        *,
        workers: int | None = None,
        gpus_per_worker: float = 0.0,
        encoder: EncoderFactory | None = None,
        max_retries: int = 3,
        write_retry_seconds: float = 60.0,
        init_options: dict[str, Any] | None = None,
    ) -> None:
        require("ray", extra="ray", feature=_FEATURE)  # fail here, before any work
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be positive, got {workers}")
        if gpus_per_worker < 0:
            raise ValueError(f"gpus_per_worker must be 0 or more, got {gpus_per_worker}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.address = address
        self.workers = workers
        self.gpus_per_worker = gpus_per_worker
        self.encoder = encoder
        self.max_retries = max_retries
        self.write_retry_seconds = write_retry_seconds
        self.init_options = dict(init_options or {})

    def _connect(self, ray: ModuleType) -> bool:
        """Connect to (or start) the cluster; True when this call started the connection."""
        if ray.is_initialized():
            return False
        address = None if self.address == "auto" else self.address
        try:
            ray.init(address=address, **{"include_dashboard": False, **self.init_options})
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise DocMemoError(f"cannot reach the Ray cluster at {self.address!r}: {exc}") from exc
        return True

    def _pool_size(self, ray: ModuleType) -> int:
        if self.workers is not None:
            return self.workers
        if self.gpus_per_worker > 0:
            gpus = float(ray.cluster_resources().get("GPU", 0))
            if gpus < self.gpus_per_worker:
                raise DocMemoError(
                    f"the Ray cluster has {gpus:g} GPUs, fewer than gpus_per_worker="
                    f"{self.gpus_per_worker:g}"
                )
            return int(gpus // self.gpus_per_worker)
        return 1

    def _actor_factory(
        self, ray: ModuleType, indexer: DocumentIndexer, server: dict[str, Any] | None
    ) -> Callable[[], Any]:
        """Starts one encoder actor (the pool's and each replacement of a dead one)."""
        factory = self.encoder or functools.partial(_load_encoder, indexer.encoder.name)
        gpu = self.gpus_per_worker > 0
        actor_class = ray.remote(EncodeWorker).options(
            num_cpus=1 if gpu else 0,
            num_gpus=self.gpus_per_worker if gpu else None,
            max_restarts=0,  # the schedule replaces a dead actor and gives its documents again
            max_task_retries=0,
            max_concurrency=QUEUED_PER_ACTOR,
            scheduling_strategy="SPREAD",
        )
        return functools.partial(
            actor_class.remote,
            factory,
            indexer.encoder.name,
            batch_size=indexer.batch_size,
            image_long_side=indexer.image_long_side,
            store_options=server,
            write_retry_seconds=self.write_retry_seconds,
            layout=indexer.store.layout,
        )

    def run(
        self, jobs: Sequence[DocumentJob], indexer: DocumentIndexer
    ) -> Generator[DocumentOutcome, None, None]:
        ray = require("ray", extra="ray", feature=_FEATURE)
        if not jobs:
            return
        started_here = self._connect(ray)
        actors: list[Any] = []
        try:
            server = _server_options(indexer.store)
            new_actor = self._actor_factory(ray, indexer, server)
            actors = [new_actor() for _ in range(self._pool_size(ray))]
            try:  # up, and with the store's encoder, before any work
                ray.get([actor.encoder_name.remote() for actor in actors])
            except ray.exceptions.RayError as exc:
                cause = getattr(exc, "cause", None) or exc
                raise DocMemoError(f"the Ray encoder workers did not start: {cause}") from exc
            schedule = Schedule(
                ray,
                indexer,
                actors,
                new_actor,
                actors_write=server is not None,
                max_retries=self.max_retries,
            )
            actors = schedule.actors  # replacements of dead actors are killed at the end too
            yield from schedule.run(jobs)
        finally:
            for actor in actors:
                ray.kill(actor)  # also ends writes in flight: uncommitted, invisible, recovered
            if started_here:
                ray.shutdown()


def _load_encoder(name: str) -> PageEncoder:
    """The default encoder factory: the encoder rebuilt from its name, in the worker."""
    from llama_index_docmemo.encoders import load_encoder

    return load_encoder(name)
