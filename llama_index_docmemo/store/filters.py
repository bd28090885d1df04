"""LlamaIndex ``MetadataFilters`` -> this package's scope (:class:`PageFilter`).

A LlamaIndex app scopes retrieval with ``MetadataFilters``; the page store filters inside
Qdrant. :func:`to_page_filter` turns the former into a :class:`PageFilter`: a top-level
``==``/``in`` on the document lifts into ``doc_ids``; every other condition goes into
``PageFilter.where``, the store's backend-neutral filter tree (each backend translates it once: ``edge.py``,
``client_requests.py``). Keys are the metadata names page nodes show: ``file_name`` (the file's
base name), ``file_path`` (its absolute path), ``doc_id`` / ``ref_doc_id`` / ``document_id``
(the document id: the path relative to the indexed folder), ``page_label``, the package's other
payload fields (``section``, ``ocr``...), or any key of the app's metadata (stored under
``meta``: ``year`` filters ``meta.year``, see :mod:`.metadata`). Conditions on ``tenant`` or ``acl`` stay conditions: a filter never sets who
is asking (:mod:`.identity` checks and intersects every scope with the caller). An operator Qdrant cannot evaluate on these payloads raises
:class:`FilterError` naming it.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.store.metadata import payload_key
from llama_index_docmemo.types import FieldGroup, FieldMatch, PageFilter

# LlamaIndex metadata names -> stored payload keys (``file_name`` is stored under its own name).
KEY_ALIASES: dict[str, str] = {
    "document_id": "doc_id",
    "ref_doc_id": "doc_id",
    "file_path": "source",
    "page_label": "page",
    "acl_group": "acl",
    "acl_groups": "acl",
}
INTEGER_KEYS = frozenset({"page", "n_pages"})
_LIFTED = {"doc_id": "doc_ids"}
_OPS: dict[FilterOperator, str] = {
    FilterOperator.EQ: "eq",
    FilterOperator.NE: "ne",
    FilterOperator.GT: "gt",
    FilterOperator.GTE: "gte",
    FilterOperator.LT: "lt",
    FilterOperator.LTE: "lte",
    FilterOperator.IN: "in",
    FilterOperator.ANY: "in",
    FilterOperator.NIN: "nin",
    FilterOperator.CONTAINS: "eq",  # a list payload matches when it holds the value
    FilterOperator.IS_EMPTY: "is_empty",
}
_RANGE_OPS = ("gt", "gte", "lt", "lte")


class FilterError(DocMemoError, ValueError):
    """A metadata filter that cannot be evaluated by Qdrant on the stored page payloads."""


def to_page_filter(scope: PageFilter | MetadataFilters | None) -> PageFilter:
    """A ``PageFilter`` for ``scope`` (a ``PageFilter`` passes through unchanged)."""
    if scope is None:
        return PageFilter()
    if isinstance(scope, PageFilter):
        return scope
    if not isinstance(scope, MetadataFilters):
        raise FilterError(
            f"a scope must be a PageFilter or MetadataFilters, got {type(scope).__name__}"
        )
    group = _group(scope)
    lifted: dict[str, Any] = {}
    rest: list[FieldMatch | FieldGroup] = []
    for clause in group.clauses if group.condition == "and" else (group,):
        field = _lift_target(clause, lifted)
        if field is None:
            rest.append(clause)
            continue
        lifted[field] = tuple(str(v) for v in _values(clause))  # type: ignore[arg-type]
    where = FieldGroup("and", tuple(rest)) if rest else None
    return PageFilter(**lifted, where=where)


def _lift_target(clause: FieldMatch | FieldGroup, lifted: dict[str, Any]) -> str | None:
    """The ``PageFilter`` field a top-level ``==``/``in`` on the document fills."""
    if not isinstance(clause, FieldMatch) or clause.op not in ("eq", "in"):
        return None
    field = _LIFTED.get(clause.key)
    return field if field is not None and field not in lifted else None


def _values(match: FieldMatch) -> tuple[Any, ...]:
    return match.value if isinstance(match.value, tuple) else (match.value,)


def _group(filters: MetadataFilters) -> FieldGroup:
    condition = FilterCondition(filters.condition or FilterCondition.AND).value
    clauses = tuple(
        _group(f) if isinstance(f, MetadataFilters) else _match(f) for f in filters.filters
    )
    if not clauses:
        raise FilterError("MetadataFilters without any filter")
    return FieldGroup(condition, clauses)  # type: ignore[arg-type]


def _match(flt: MetadataFilter) -> FieldMatch | FieldGroup:
    key = payload_key(KEY_ALIASES.get(flt.key, flt.key))
    operator = FilterOperator(flt.operator)
    if operator == FilterOperator.ALL:
        values = _as_list(flt, key)
        return FieldGroup("and", tuple(FieldMatch(key, "eq", v) for v in values))
    op = _OPS.get(operator)
    if op is None:
        raise FilterError(
            f"filter on {flt.key!r}: operator {operator.value!r} cannot be translated to a "
            f"Qdrant filter (supported: {', '.join(sorted({o.value for o in _OPS} | {'all'}))})"
        )
    if op == "is_empty":
        return FieldMatch(key, op)
    if op in ("in", "nin"):
        return FieldMatch(key, op, tuple(_as_list(flt, key)))
    if isinstance(flt.value, list):
        raise FilterError(f"filter on {flt.key!r}: operator {operator.value!r} takes one value")
    value = _typed(flt.value, key, flt.key)
    if op in _RANGE_OPS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise FilterError(f"filter on {flt.key!r}: {operator.value!r} needs a number")
    return FieldMatch(key, op, value)  # type: ignore[arg-type]


def _as_list(flt: MetadataFilter, key: str) -> list[Any]:
    values = flt.value if isinstance(flt.value, list) else [flt.value]
    return [_typed(v, key, flt.key) for v in values]


def _typed(value: Any, key: str, name: str) -> Any:
    """Page numbers are stored as integers (``page_label`` "12" filters page 12)."""
    if key in INTEGER_KEYS and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise FilterError(f"filter on {name!r}: {value!r} is not a page number") from None
    if value is None:
        raise FilterError(f"filter on {name!r} has no value")
    return value
