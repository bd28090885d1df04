"""The driver's loop over one batch on Ray: parse tasks feed the encoder actors, results become
outcomes, a dead actor is replaced and its documents are given again, alone.

An actor that dies takes every document it held. So that a document which kills its worker
(a poison PDF) cannot take its neighbours with it, a document whose actor died is retried on an
actor holding nothing else: a neighbour dies at most once for another's sake, and a document
fails once it has died more than ``max_retries`` times. The schedule replaces dead actors itself
(Ray's own restarts would re-run both documents of the dead actor together).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.distributed.workers import EncodedDocument, prepare_task
from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.indexing.stages import (
    DocumentJob,
    DocumentOutcome,
    PreparedDocument,
    failure,
    write_document,
)

if TYPE_CHECKING:
    from types import ModuleType

    from llama_index_docmemo.indexing.indexer import DocumentIndexer

QUEUED_PER_ACTOR = 2
"""Documents an actor holds at once: one encoding, one waiting or being written."""


@dataclass
class _Parsed:
    """A parsed document waiting for an actor: its job, the reference to its pages, deaths."""

    job: DocumentJob
    body: Any
    deaths: int = 0


@dataclass
class _Held:
    """A document on an actor: what it is, which actor (slot and handle), whether alone."""

    parsed: _Parsed
    slot: int
    actor: Any
    alone: bool


def failure_reason(ray: ModuleType, exc: BaseException, deaths: int | None = None) -> str:
    """What the report says about a document whose Ray step failed for good."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = exc.cause
        return f"{type(cause).__name__}: {cause}"
    times = f" {deaths} times" if deaths is not None else ""
    return f"the Ray worker died{times} on it ({type(exc).__name__}: {exc})"


class Schedule:
    """One batch: ``run`` yields an outcome per job as they finish."""

    def __init__(
        self,
        ray: ModuleType,
        indexer: DocumentIndexer,
        actors: Sequence[Any],
        new_actor: Callable[[], Any],
        *,
        actors_write: bool,
        max_retries: int,
    ) -> None:
        self.ray = ray
        self.indexer = indexer
        self.actors = list(actors)  # the live pool; a dead actor's slot gets a new one
        self.new_actor = new_actor
        self.actors_write = actors_write
        self.max_retries = max_retries
        self.prepare = ray.remote(prepare_task).options(
            num_cpus=1, num_returns=2, max_retries=max_retries
        )
        self.ocr = ray.put(indexer.ocr_engine)
        self.summarizer = ray.put(indexer.summarizer)
        self.load = [0] * len(self.actors)  # documents held by each actor
        self.preparing: dict[Any, tuple[DocumentJob, Any]] = {}  # outcome ref -> job, body ref
        self.ready: deque[_Parsed] = deque()
        self.again: deque[_Parsed] = deque()  # their actor died: each goes to an idle actor
        self.held: dict[Any, _Held] = {}  # actor call ref -> the document it encodes

    def run(self, jobs: Sequence[DocumentJob]) -> Generator[DocumentOutcome, None, None]:
        pending = deque(jobs)
        while True:
            self._submit(pending)
            waiting = [*self.preparing, *self.held]
            if not waiting:
                return
            done, _ = self.ray.wait(waiting, num_returns=1)
            for ref in done:
                outcome = self._parsed(ref) if ref in self.preparing else self._encoded(ref)
                if outcome is not None:
                    yield outcome

    def _submit(self, pending: deque[DocumentJob]) -> None:
        """Parse enough documents ahead that no actor waits, and no more; feed the actors."""
        ahead = max(4, 2 * QUEUED_PER_ACTOR * len(self.actors))
        while pending and len(self.preparing) + len(self.ready) < ahead:
            job = pending.popleft()
            outcome_ref, body_ref = self.prepare.remote(job, self.ocr, self.summarizer)
            self.preparing[outcome_ref] = (job, body_ref)
        while self.again and 0 in self.load:
            self._give(self.again.popleft(), self.load.index(0), alone=True)
        while self.ready and min(self.load) < QUEUED_PER_ACTOR:
            self._give(self.ready.popleft(), self.load.index(min(self.load)), alone=False)

    def _give(self, parsed: _Parsed, slot: int, *, alone: bool) -> None:
        actor = self.actors[slot]
        method = actor.encode_and_write if self.actors_write else actor.encode
        self.held[method.remote(parsed.body)] = _Held(parsed, slot, actor, alone)
        self.load[slot] += QUEUED_PER_ACTOR if alone else 1

    def _replace(self, held: _Held) -> None:
        """A new actor in the slot of the one that died (once, whichever call said so first)."""
        if self.actors[held.slot] is held.actor:
            self.ray.kill(held.actor)  # unavailable may mean unreachable: make sure it is gone
            self.actors[held.slot] = self.new_actor()

    def _parsed(self, ref: Any) -> DocumentOutcome | None:
        job, body = self.preparing.pop(ref)
        try:
            outcome = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            return failure(job, failure_reason(self.ray, exc))
        if outcome is None:
            self.ready.append(_Parsed(job, body))
        return outcome

    def _encoded(self, ref: Any) -> DocumentOutcome | None:
        held = self.held.pop(ref)
        parsed = held.parsed
        self.load[held.slot] -= QUEUED_PER_ACTOR if held.alone else 1
        try:
            result = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            self._replace(held)
            parsed.deaths += 1
            if parsed.deaths > self.max_retries:
                return failure(parsed.job, failure_reason(self.ray, exc, parsed.deaths))
            self.again.append(parsed)
            return None
        except self.ray.exceptions.RayError as exc:
            return failure(parsed.job, failure_reason(self.ray, exc))
        if isinstance(result, DocumentOutcome):
            return result
        return self._write(parsed, result)

    def _write(self, parsed: _Parsed, encoded: EncodedDocument) -> DocumentOutcome:
        """The single writer (an embedded store): this process writes what the actor encoded."""
        prepared: PreparedDocument = self.ray.get(parsed.body)
        prepared.seconds = encoded.seconds
        try:
            return write_document(self.indexer.store, prepared, encoded.embeddings)
        except StoreError as exc:
            return failure(parsed.job, str(exc), store_failed=True)
