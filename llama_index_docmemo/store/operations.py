"""The store's requests as plain data: the shared store logic yields them, a backend sends them.

``route`` names the tenant (its stored key, :func:`.ids.tenant_key`) an operation concerns,
or None for every tenant: a server collection sharded by tenant sends it as the shard key.

:class:`~._qdrant.QdrantLayoutStore` writes every step once, as a generator of these operations
(sans-I/O); a sync driver runs it on any backend, and the server backend also has an async
driver over qdrant-client's ``AsyncQdrantClient``, so no step is written twice.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from llama_index_docmemo.store.payloads import IndexKind, PointData
from llama_index_docmemo.store.plans import SearchPlan
from llama_index_docmemo.types import FieldGroup

T = TypeVar("T")


@dataclass(frozen=True)
class Upsert:
    """Write points (durably, before the reply)."""

    points: Sequence[PointData]
    route: str | None = None


@dataclass(frozen=True)
class Delete:
    """Delete every point matching ``where``."""

    where: FieldGroup
    route: str | None = None


@dataclass(frozen=True)
class SetPayload:
    """Add or overwrite ``payload`` keys on every point matching ``where``."""

    where: FieldGroup
    payload: dict[str, Any]
    route: str | None = None


@dataclass(frozen=True)
class CreateIndex:
    """Create a payload index (a no-op if it exists)."""

    key: str
    kind: IndexKind
    is_tenant: bool


@dataclass(frozen=True)
class Commit:
    """Make a written revision the document's: its record (the commit point), then the other
    revisions' pages deleted, then ``pending`` cleared on its pages, then the journal note
    deleted. A server gets these in one request; an embedded shard applies them in order.
    ``record`` None: the record is stored already (recovery finishes its commit; rewriting it
    from its payload would drop its card's vectors)."""

    record: PointData | None
    doc_key: str
    revision: str
    route: str | None = None


@dataclass(frozen=True)
class Scroll:
    """One page of payloads matching ``where`` -> ``(payloads, next offset or None)``."""

    where: FieldGroup
    fields: Sequence[str] | None
    offset: Any
    limit: int
    route: str | None = None


@dataclass(frozen=True)
class Count:
    """Number of points matching ``where`` -> ``int``; with ``exact=False`` Qdrant's estimate
    from its payload indexes (what its query planner uses), which costs no scan."""

    where: FieldGroup
    route: str | None = None
    exact: bool = True


@dataclass(frozen=True)
class Retrieve:
    """The payload of one point -> ``dict`` or ``None``."""

    point_id: str
    route: str | None = None


@dataclass(frozen=True)
class Search:
    """Every branch of ``plan`` in one request -> one ``[(payload, score), ...]`` per branch."""

    plan: SearchPlan
    route: str | None = None


Operation = Upsert | Delete | SetPayload | CreateIndex | Commit | Scroll | Count | Retrieve | Search
Steps = Generator[Operation, Any, T]
"""A store step: yields operations, receives each one's reply, returns its result."""


SCROLL_PAGE = 256


def scroll_all(
    where: FieldGroup, fields: Sequence[str] | None = None, route: str | None = None
) -> Steps[list[dict]]:
    """Every payload matching ``where`` (only ``fields`` when given), page by page."""
    payloads: list[dict[str, Any]] = []
    offset: Any = None
    while True:
        page, offset = yield Scroll(where, fields, offset, SCROLL_PAGE, route)
        payloads.extend(page)
        if offset is None:
            return payloads
