"""The app's own metadata: which keys a page keeps, where they are stored, how filters name them.

A Document's metadata (``SimpleDirectoryReader``'s ``file_type``, ``file_size``, dates, the
``file_metadata=`` keys such as ``year`` or ``team``, ``docmemo index --meta``) is stored with
each page under one payload key, :data:`USER` (``{"meta": {"year": 2023}}``), so no user key can
collide with the package's own fields: identity (``tenant``, ``acl`` and their stored forms) and
bookkeeping (``kind``, ``revision``, ``write_state``...) are never set from metadata. Nodes show
the user's keys beside the package's (the package's win); a filter on a user key reads
``meta.<key>`` (:func:`~llama_index_docmemo.store.scope.payload_key`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from llama_index_docmemo.store.points import PACKAGE_FIELDS, USER, IndexKind

DERIVED = frozenset({"file_name", "file_path", "page_label"})
"""Keys readers set that the package derives itself (from the file and page number): a
reader's copy is dropped without a word."""
PAGE_NUMBER_KEYS = frozenset({"source", "page"})
"""Reserved keys that readers fill with the page number (PyMuPDFReader's ``source``): dropped
without a word when they hold one."""

RESERVED = PACKAGE_FIELDS | frozenset(
    {"doc_id", "ref_doc_id", "document_id", "acl_group", "acl_groups", "summary"}
    | {"bbox", "caption", "image_path", "layout_source"}
)
"""Keys of the package's nodes and filters: refused in metadata (named in the index report)."""


def user_metadata(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The keys of ``metadata`` a page stores, and why the others were left out.

    Kept: JSON values (strings, numbers, booleans, lists, objects; not None) under keys the
    package does not use. Left out and named: reserved keys (:data:`RESERVED`) and values JSON
    cannot hold (a ``datetime``, NaN...); left out silently: :data:`DERIVED` keys and None.
    """
    kept: dict[str, Any] = {}
    reserved: list[str] = []
    unstorable: list[str] = []
    for key, value in metadata.items():
        if key in DERIVED or value is None or (key in PAGE_NUMBER_KEYS and _is_number(value)):
            continue
        if not isinstance(key, str) or key in RESERVED or key.startswith(f"{USER}."):
            reserved.append(str(key))
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            unstorable.append(key)
            continue
        kept[key] = value
    problems = []
    if reserved:
        problems.append(
            f"metadata keys {_names(reserved)} are reserved by docmemo and were not stored "
            "(tenant and ACL are set where the index is built: DocMemoIndex(..., tenant=, acl=))"
        )
    if unstorable:
        problems.append(f"metadata keys {_names(unstorable)} do not hold JSON values: not stored")
    return kept, problems


def _is_number(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit())


def _names(keys: list[str]) -> str:
    return ", ".join(repr(k) for k in sorted(set(keys)))


def index_kind(value: Any) -> IndexKind | None:
    """The payload index a user value takes (lists: of their first item), None for objects."""
    if isinstance(value, list):
        return index_kind(value[0]) if value else None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "keyword" if isinstance(value, str) else None


def metadata_digest(shared: Mapping[str, Any], pages: Mapping[int, Mapping[str, Any]]) -> str:
    """What a document's metadata is, as one hash ("" for none): part of its stored revision,
    so changed metadata re-indexes an unchanged file."""
    own = {str(page): dict(values) for page, values in sorted(pages.items()) if values}
    if not shared and not own:
        return ""
    text = json.dumps([dict(shared), own], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
