"""Which points a store step touches, as one backend-neutral filter tree (``FieldGroup``).

Every filter of the store, from a caller's scope to a recovery's stale pages, is a
:class:`~llama_index_docmemo.types.FieldGroup` built here; each backend translates that one
form (``edge.py``, ``client_requests.py``). Caller scopes follow :mod:`.access` (deny by
default), and page scopes leave out pages of uncommitted revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index_docmemo.store import access
from llama_index_docmemo.store.access import match
from llama_index_docmemo.store.payloads import (
    KIND,
    KIND_JOURNAL,
    KIND_PAGE,
    PENDING,
    REVISION,
    WRITE_STATE,
)
from llama_index_docmemo.types import FieldGroup, FieldMatch, PageFilter

Values = Sequence[str | int | bool]


def everything(*clauses: FieldMatch | FieldGroup) -> FieldGroup:
    """All of ``clauses``."""
    return FieldGroup("and", clauses)


def none_of(*clauses: FieldMatch | FieldGroup) -> FieldGroup:
    return FieldGroup("not", clauses)


COMMITTED = none_of(FieldMatch(WRITE_STATE, "eq", PENDING))
"""Pages whose revision is committed (pending pages are being written or were left by a crash)."""


def matches_nothing(page_filter: PageFilter | None) -> bool:
    """An empty ``doc_ids`` tuple admits no point at all (no groups still sees public documents)."""
    return page_filter is not None and page_filter.doc_ids == ()


def scope_filter(kind: str, page_filter: PageFilter | None, **extra: Values) -> FieldGroup:
    """Points of ``kind`` visible through ``page_filter``, restricted by ``extra`` keys; committed
    pages only when ``kind`` is pages."""
    clauses: list[FieldMatch | FieldGroup] = [match(KIND, (kind,))]
    clauses += access.access_conditions(page_filter)
    clauses += [match(key, tuple(values)) for key, values in extra.items()]
    if kind == KIND_PAGE:
        clauses.append(COMMITTED)
    if page_filter is not None and page_filter.where is not None:
        clauses.append(page_filter.where)
    return everything(*clauses)


def kind_filter(kind: str, **extra: Values) -> FieldGroup:
    """Every point of ``kind`` (journal notes, records, pending pages too), by ``extra`` keys."""
    return everything(
        match(KIND, (kind,)), *(match(key, tuple(values)) for key, values in extra.items())
    )


def stale_pages_filter(doc_key: str, keep_revision: str | None) -> FieldGroup:
    """Pages of one document other than those of ``keep_revision`` (None: all its pages)."""
    pages = kind_filter(KIND_PAGE, **{access.DOC_KEY: [doc_key]})
    if keep_revision is None:
        return pages
    return everything(*pages.clauses, none_of(match(REVISION, (keep_revision,))))


def revision_pages_filter(doc_key: str, revision_id: str) -> FieldGroup:
    """The pages of one revision of one document."""
    return kind_filter(KIND_PAGE, **{access.DOC_KEY: [doc_key], REVISION: [revision_id]})


def journal_filter(doc_keys: Sequence[str] | None = None) -> FieldGroup:
    """Journal notes (of ``doc_keys`` when given)."""
    if doc_keys is None:
        return kind_filter(KIND_JOURNAL)
    return kind_filter(KIND_JOURNAL, **{access.DOC_KEY: list(doc_keys)})
