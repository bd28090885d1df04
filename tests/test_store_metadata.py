"""The app's metadata as pages store it: kept keys, refused keys, where filters look."""

from __future__ import annotations

import datetime

import pytest
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_docmemo import IdentityError, PageFilter
from llama_index_docmemo.store import reads
from llama_index_docmemo.store.metadata import metadata_digest, user_metadata
from llama_index_docmemo.store.points import page_payload, revision
from llama_index_docmemo.store.scope import payload_key
from llama_index_docmemo.types import FieldMatch, PageRecord


def test_json_keys_are_kept_reserved_and_unstorable_ones_named() -> None:
    kept, problems = user_metadata(
        {
            "year": 2023,
            "team": "risk",
            "tags": ["a", "b"],
            "file_name": "10k.pdf",  # derived from the file: dropped silently
            "source": "7",  # PyMuPDFReader's page number: dropped silently
            "tenant": "other",
            "tenant_key": "\x00no-tenant",
            "when": datetime.date(2024, 1, 1),
            "empty": None,
        }
    )
    assert kept == {"year": 2023, "team": "risk", "tags": ["a", "b"]}
    assert "'tenant', 'tenant_key' are reserved" in problems[0]
    assert "'when'" in problems[1]


def test_user_keys_are_stored_and_filtered_under_meta() -> None:
    assert payload_key("year") == "meta.year" and payload_key("section") == "section"
    record = PageRecord("a.pdf", "v", 1, 1, "text", "/a.pdf", metadata={"year": 2023})
    payload = page_payload(record, revision("v", []))
    assert payload["meta"] == {"year": 2023} and "year" not in payload
    assert reads.record_from_payload(payload).metadata == {"year": 2023}
    scope = PageFilter(tenant="acme").narrow(
        MetadataFilters(
            filters=[MetadataFilter(key="year", value=2023, operator=FilterOperator.GTE)]
        ),
    )
    assert scope.where.clauses == (FieldMatch("meta.year", "gte", 2023),)
    with pytest.raises(IdentityError):
        PageFilter(tenant="acme").narrow(
            MetadataFilters(filters=[MetadataFilter(key="tenant", value="b")])
        )


def test_changed_metadata_is_a_new_revision() -> None:
    assert metadata_digest({}, {1: {}}) == ""
    first, second = metadata_digest({"year": 2023}, {}), metadata_digest({"year": 2024}, {})
    assert first != second
    assert revision("v", [], first) != revision("v", [], second) != revision("v", [])
