"""The caller's identity, and the one rule every scope obeys: it can only narrow it.

An index, engine or retriever is built for one caller: a tenant and ACL groups, set by the code
that builds it (the app's authenticated user), never by a filter. In a LlamaIndex app filters
come from end users or from an LLM (auto-retrieval), so every scope a query carries (``filters``,
``page_filter``, a per-query scope, ``doc_ids``) goes through :func:`narrow`, which intersects
it with the caller:

- ``tenant`` and ``acl_groups`` are the caller's; a request may repeat them or hold fewer groups
  (narrowing), ``doc_ids`` are intersected and ``where`` trees are joined by ``and``, so no
  request can reach a page the caller cannot.
- A request that *names* an identity outside the caller (another tenant, a group the caller does
  not hold, or a reserved internal value), in a ``PageFilter`` field or in any condition on the
  keys behind them (``tenant``, ``acl`` and the stored ``tenant_key`` / ``access``), is refused
  with :class:`IdentityError`: a filter cannot change who is asking, and a silent empty answer
  would hide the mistake.
"""

from __future__ import annotations

from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_docmemo.store import access
from llama_index_docmemo.store.filters import FilterError, to_page_filter
from llama_index_docmemo.types import FieldGroup, FieldMatch, PageFilter

ScopeLike = PageFilter | MetadataFilters | None
"""A scope: this package's ``PageFilter``, LlamaIndex ``MetadataFilters``, or none."""

TENANT_KEYS = frozenset({"tenant", access.TENANT_KEY})
GROUP_KEYS = frozenset({"acl", access.ACCESS})
_NAMING = {True: ("eq", "in"), False: ("ne", "nin")}  # ops that name a value, by polarity


class IdentityError(FilterError):
    """A scope that names another tenant, a group the caller does not hold, or a reserved value:
    identity is set where the index, engine or retriever is built, and filters only narrow it."""


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
    return narrow(PageFilter(), page_filter)


def narrow(identity: PageFilter, request: ScopeLike) -> PageFilter:
    """``identity`` narrowed by ``request`` (``None`` in a request's ``tenant`` / ``acl_groups``
    means: the caller's); raises :class:`IdentityError` when ``request`` names an identity
    outside ``identity``."""
    scope = to_page_filter(request)
    _check_fields(identity, scope)
    if scope.where is not None:
        _check_tree(identity, scope.where, positive=True)
    return PageFilter(
        doc_ids=_both(identity.doc_ids, scope.doc_ids),
        tenant=identity.tenant,
        acl_groups=identity.acl_groups if scope.acl_groups is None else scope.acl_groups,
        where=_joined(identity.where, scope.where),
    )


def _check_fields(identity: PageFilter, scope: PageFilter) -> None:
    if scope.tenant is not None and _checked("tenant", scope.tenant) != identity.tenant:
        raise IdentityError(_other_tenant(identity, scope.tenant))
    held = set(identity.acl_groups or ())
    for group in scope.acl_groups or ():
        if _checked("ACL group", group) not in held:
            raise IdentityError(_other_group(identity, group))


def _check_tree(identity: PageFilter, clause: FieldMatch | FieldGroup, *, positive: bool) -> None:
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
        own = identity.tenant if clause.key == "tenant" else access.tenant_key(identity.tenant)
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
        return access.check_name(kind, name)  # type: ignore[arg-type]
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
    return FieldGroup("and", (first, second))


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
