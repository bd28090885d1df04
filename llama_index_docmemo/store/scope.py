"""Which points a request may touch: the caller's scope (:class:`PageFilter`) and the store's
own selectors, as one backend-neutral filter tree (:class:`~llama_index_docmemo.types.FieldGroup`).

A scope is who asks (``tenant``, ``acl_groups``) and what they ask about (``doc_ids``,
``where``). Everything a scope does lives here, so it is one value from the app to Qdrant:

- **Made**: an engine, retriever or index is built for one caller (:func:`caller`): the app's
  authenticated user, never a filter. LlamaIndex ``MetadataFilters`` become a scope through
  :func:`to_page_filter`: a top-level ``==``/``in`` on the document lifts into ``doc_ids``,
  every other condition goes into ``where``. Keys are the metadata names page nodes show:
  ``file_name``, ``file_path``, ``doc_id`` / ``ref_doc_id`` / ``document_id``, ``page_label``,
  the package's other payload fields (``section``, ``ocr``...), or any key of the app's
  metadata (stored under ``meta``: ``year`` filters ``meta.year``). An operator Qdrant cannot
  evaluate on these payloads raises :class:`FilterError` naming it.
- **Narrowed**: every scope a query carries (``filters``, ``page_filter``, a per-query scope)
  goes through :meth:`PageFilter.narrow`, which intersects it with the caller: ``doc_ids`` are
  intersected, ``where`` trees joined by ``and``, fewer groups may be asked for. A request that
  *names* an identity outside the caller (another tenant, a group it does not hold, a reserved
  value), in a field or in any condition on ``tenant`` / ``acl`` / their stored forms, raises
  :class:`IdentityError`: a filter cannot change who is asking, and a silent empty answer would
  hide the mistake.
- **Applied**, deny by default (:meth:`PageFilter.conditions`, :func:`scope_filter`): a caller sees only documents of
  its own tenant (no tenant: only documents indexed without one), and of those only documents
  without an ACL or whose ACL shares one of its groups. Both rules are one indexed match on the
  stored values (:mod:`.points`), on every path (search, page fetch, schemas, counts); each
  backend translates the tree once (``edge.py``, ``client_requests.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.store.points import (
    ACCESS,
    DOC_KEY,
    KIND,
    KIND_JOURNAL,
    KIND_PAGE,
    PACKAGE_FIELDS,
    PENDING,
    PUBLIC,
    REVISION,
    TENANT_KEY,
    USER,
    WRITE_STATE,
    check_name,
    tenant_key,
)
from llama_index_docmemo.types import FieldGroup, FieldMatch

Clause = FieldMatch | FieldGroup
Values = Sequence[str | int | bool]


class FilterError(DocMemoError, ValueError):
    """A metadata filter that cannot be evaluated by Qdrant on the stored page payloads."""


class IdentityError(FilterError):
    """A scope that names another tenant, a group the caller does not hold, or a reserved value:
    identity is set where the index, engine or retriever is built, and filters only narrow it."""


@dataclass(frozen=True)
class PageFilter:
    """A caller and its scope, applied inside Qdrant on every path (deny by default).

    Args:
        doc_ids: restrict to these documents (None: all the caller may see; empty: none).
        tenant: the caller's tenant (None: only documents indexed without a tenant).
        acl_groups: the caller's groups: documents without an ACL, and those whose ACL shares a
            group with these (None or empty: documents without an ACL only).
        where: further conditions on any stored payload key (from ``MetadataFilters``).
    """

    doc_ids: tuple[str, ...] | None = None
    tenant: str | None = None
    acl_groups: tuple[str, ...] | None = None
    where: FieldGroup | None = None

    @property
    def route(self) -> str:
        """The stored tenant value the scope's reads go to (a server shard key's tenant)."""
        return tenant_key(self.tenant)

    @property
    def matches_nothing(self) -> bool:
        """An empty ``doc_ids`` admits no point at all (no groups still sees public documents)."""
        return self.doc_ids == ()

    @property
    def visible_groups(self) -> tuple[str, ...]:
        """Stored access values the caller may see: public documents and those of its groups."""
        return (PUBLIC, *sorted(set(self.acl_groups or ())))

    def narrow(self, request: ScopeLike) -> PageFilter:
        """This caller narrowed by ``request`` (``None`` in a request's ``tenant`` /
        ``acl_groups`` means: the caller's); raises :class:`IdentityError` when ``request``
        names an identity outside this caller."""
        scope = to_page_filter(request)
        _check_fields(self, scope)
        if scope.where is not None:
            _check_tree(self, scope.where, positive=True)
        return PageFilter(
            doc_ids=_both(self.doc_ids, scope.doc_ids),
            tenant=self.tenant,
            acl_groups=self.acl_groups if scope.acl_groups is None else scope.acl_groups,
            where=_joined(self.where, scope.where),
        )

    def conditions(self) -> list[Clause]:
        """What the scope admits, as conditions that must all hold."""
        clauses: list[Clause] = []
        if self.doc_ids is not None:
            clauses.append(match("doc_id", self.doc_ids))
        clauses.append(match(TENANT_KEY, (self.route,)))
        clauses.append(match(ACCESS, self.visible_groups))
        if self.where is not None:
            clauses.append(self.where)
        return clauses

    def metadata_keys(self) -> list[str]:
        """The app's metadata keys ``where`` names (without the ``meta.`` prefix), sorted."""
        return sorted(set(_user_keys(self.where)))


ScopeLike = PageFilter | MetadataFilters | None
"""A scope: this package's ``PageFilter``, LlamaIndex ``MetadataFilters``, or none."""


# ------------------------------------------------------------------ made: the caller, filters


def caller(page_filter: ScopeLike) -> PageFilter:
    """The scope an engine or retriever is built with, checked: a ``PageFilter`` sets the
    caller (its tenant and groups must be valid names, never reserved values); ``MetadataFilters``
    narrow the caller without a tenant or groups."""
    if isinstance(page_filter, PageFilter):
        if page_filter.tenant is not None:
            _checked("tenant", page_filter.tenant)
        for group in page_filter.acl_groups or ():
            _checked("ACL group", group)
        return page_filter
    return PageFilter().narrow(page_filter)


KEY_ALIASES: dict[str, str] = {
    "document_id": "doc_id",
    "ref_doc_id": "doc_id",
    "file_path": "source",
    "page_label": "page",
    "acl_group": "acl",
    "acl_groups": "acl",
}
"""LlamaIndex metadata names -> stored payload keys (``file_name`` is stored under its own name)."""
INTEGER_KEYS = frozenset({"page", "n_pages"})
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


def to_page_filter(scope: ScopeLike) -> PageFilter:
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
    doc_ids: tuple[str, ...] | None = None
    rest: list[Clause] = []
    for clause in group.clauses if group.condition == "and" else (group,):
        lifts = (
            doc_ids is None
            and isinstance(clause, FieldMatch)
            and clause.key == "doc_id"
            and clause.op in ("eq", "in")
        )
        if lifts:
            values = clause.value if isinstance(clause.value, tuple) else (clause.value,)
            doc_ids = tuple(str(v) for v in values)
        else:
            rest.append(clause)
    return PageFilter(doc_ids=doc_ids, where=everything(*rest) if rest else None)


def payload_key(name: str) -> str:
    """Where a filter's key is stored: the package's own fields at the top, the app's keys in
    :data:`~.payloads.USER`."""
    return name if name in PACKAGE_FIELDS else f"{USER}.{name}"


def has_key(key: str) -> FieldGroup:
    """Points whose app metadata holds ``key`` (with a value)."""
    return none_of(FieldMatch(payload_key(key), "is_empty"))


def _group(filters: MetadataFilters) -> FieldGroup:
    condition = FilterCondition(filters.condition or FilterCondition.AND).value
    clauses = tuple(
        _group(f) if isinstance(f, MetadataFilters) else _match(f) for f in filters.filters
    )
    if not clauses:
        raise FilterError("MetadataFilters without any filter")
    return FieldGroup(condition, clauses)  # type: ignore[arg-type]


def _match(flt: MetadataFilter) -> Clause:
    key = payload_key(KEY_ALIASES.get(flt.key, flt.key))
    operator = FilterOperator(flt.operator)
    if operator == FilterOperator.ALL:
        return everything(*(FieldMatch(key, "eq", v) for v in _as_list(flt, key)))
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


def _user_keys(clause: Clause | None) -> Iterator[str]:
    if clause is None:
        return
    if isinstance(clause, FieldGroup):
        for child in clause.clauses:
            yield from _user_keys(child)
    elif clause.key.startswith(f"{USER}."):
        yield clause.key[len(USER) + 1 :]


# ------------------------------------------------------------------ narrowed: identity checks

TENANT_KEYS = frozenset({"tenant", TENANT_KEY})
GROUP_KEYS = frozenset({"acl", ACCESS})
_NAMING = {True: ("eq", "in"), False: ("ne", "nin")}  # ops that name a value, by polarity


def _check_fields(identity: PageFilter, scope: PageFilter) -> None:
    if scope.tenant is not None and _checked("tenant", scope.tenant) != identity.tenant:
        raise IdentityError(_other_tenant(identity, scope.tenant))
    held = set(identity.acl_groups or ())
    for group in scope.acl_groups or ():
        if _checked("ACL group", group) not in held:
            raise IdentityError(_other_group(identity, group))


def _check_tree(identity: PageFilter, clause: Clause, *, positive: bool) -> None:
    """Refuse conditions that name another identity (``tenant == "B"``, ``not (tenant != "B")``)
    or a reserved value; conditions that exclude one (``tenant != "B"``) only narrow."""
    if isinstance(clause, FieldGroup):
        inner = positive != (clause.condition == "not")
        for child in clause.clauses:
            _check_tree(identity, child, positive=inner)
        return
    values = clause.value if isinstance(clause.value, tuple) else (clause.value,)
    for value in values:
        if isinstance(value, str) and value.startswith("\x00"):
            raise IdentityError(f"filter on {clause.key!r}: {value!r} is a reserved value")
    if clause.op not in _NAMING[positive]:
        return
    if clause.key in TENANT_KEYS:
        own = identity.tenant if clause.key == "tenant" else identity.route
        for value in values:
            if value != own:
                raise IdentityError(_other_tenant(identity, value))
    elif clause.key in GROUP_KEYS:
        held = set(identity.acl_groups or ())
        for value in values:
            if value not in held:
                raise IdentityError(_other_group(identity, value))


def _checked(kind: str, name: object) -> str:
    try:
        return check_name(kind, name)  # type: ignore[arg-type]
    except ValueError as error:
        raise IdentityError(str(error)) from None


def _both(first: tuple[str, ...] | None, second: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if first is None or second is None:
        return second if first is None else first
    kept = set(first)
    return tuple(doc for doc in second if doc in kept)


def _joined(first: FieldGroup | None, second: FieldGroup | None) -> FieldGroup | None:
    if first is None or second is None:
        return second if first is None else first
    return everything(first, second)


def _who(identity: PageFilter) -> str:
    tenant = f"tenant {identity.tenant!r}" if identity.tenant is not None else "no tenant"
    held = ", ".join(repr(g) for g in identity.acl_groups or ())
    return f"the caller has {tenant} and {f'ACL groups {held}' if held else 'no ACL groups'}"


_HOW = (
    "identity is set where the index, engine or retriever is built "
    "(DocMemoIndex(..., tenant=, acl=) or page_filter=PageFilter(tenant=, acl_groups=)); "
    "filters can only narrow it"
)


def _other_tenant(identity: PageFilter, tenant: object) -> str:
    return f"the scope names tenant {tenant!r}, but {_who(identity)}: {_HOW}"


def _other_group(identity: PageFilter, group: object) -> str:
    return f"the scope names ACL group {group!r}, but {_who(identity)}: {_HOW}"


# ------------------------------------------------------------------ applied: filter trees


def match(key: str, values: Values) -> FieldMatch:
    """``key`` equal to the one value, or to any of several."""
    return (
        FieldMatch(key, "eq", values[0])
        if len(values) == 1
        else FieldMatch(key, "in", tuple(values))
    )


def everything(*clauses: Clause) -> FieldGroup:
    """All of ``clauses``."""
    return FieldGroup("and", clauses)


def none_of(*clauses: Clause) -> FieldGroup:
    return FieldGroup("not", clauses)


COMMITTED = none_of(FieldMatch(WRITE_STATE, "eq", PENDING))
"""Pages whose revision is committed (pending pages are being written or were left by a crash)."""


def scope_filter(kind: str, scope: PageFilter | None, **extra: Values) -> FieldGroup:
    """Points of ``kind`` visible through ``scope`` (None: the store owner's unrestricted view,
    for maintenance), restricted by ``extra`` keys; committed pages only when ``kind`` is pages."""
    admits = scope.conditions() if scope is not None else []
    where = admits.pop() if scope is not None and scope.where is not None else None
    clauses: list[Clause] = [match(KIND, (kind,)), *admits]
    clauses += [match(key, tuple(values)) for key, values in extra.items()]
    if kind == KIND_PAGE:
        clauses.append(COMMITTED)
    if where is not None:
        clauses.append(where)
    return everything(*clauses)


def kind_filter(kind: str, **extra: Values) -> FieldGroup:
    """Every point of ``kind`` (journal notes, records, pending pages too), by ``extra`` keys."""
    return everything(
        match(KIND, (kind,)), *(match(key, tuple(values)) for key, values in extra.items())
    )


def stale_pages_filter(doc_key: str, keep_revision: str | None) -> FieldGroup:
    """Pages of one document other than those of ``keep_revision`` (None: all its pages)."""
    pages = kind_filter(KIND_PAGE, **{DOC_KEY: [doc_key]})
    if keep_revision is None:
        return pages
    return everything(*pages.clauses, none_of(match(REVISION, (keep_revision,))))


def revision_pages_filter(doc_key: str, revision_id: str) -> FieldGroup:
    """The pages of one revision of one document."""
    return kind_filter(KIND_PAGE, **{DOC_KEY: [doc_key], REVISION: [revision_id]})


def journal_filter(doc_keys: Sequence[str] | None = None) -> FieldGroup:
    """Journal notes (of ``doc_keys`` when given)."""
    if doc_keys is None:
        return kind_filter(KIND_JOURNAL)
    return kind_filter(KIND_JOURNAL, **{DOC_KEY: list(doc_keys)})
