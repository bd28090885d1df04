"""The reference-graph cache is scope-correct, on both backends.

A graph is built from the pages its scope may read and kept per scope: a query filtered to a few
pages neither leaves a partial graph for an unfiltered one nor sees links to pages outside its
filter, and a caller without the document's ACL group never gets the graph another caller built.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_store_backends import BACKENDS, make_document, open_store_on

from llama_index_docmemo.config import LeverSettings, SelectionSettings
from llama_index_docmemo.levers.rounds import RoundLevers
from llama_index_docmemo.memory.schema import ReferenceGraph
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import FieldGroup, FieldMatch

DOC = "report.pdf"
TEXTS = {
    1: "Revenue by region: see Table 7 for the breakdown.",
    2: "Office plants and parking.",
    3: "Weather notes.",
    4: "Table 7: revenue breakdown by region.",
}
OWNER = PageFilter(tenant="t1", acl_groups=("g1",))
FIRST_TWO = PageFilter(
    tenant="t1", acl_groups=("g1",), where=FieldGroup("and", (FieldMatch("page", "lte", 2),))
)


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path: Path):
    store = open_store_on(request.param, tmp_path / "store")
    schema, records, embeddings = make_document(DOC, "v1", 4, seed=1, tenant="t1", acl=("g1",))
    for record in records:
        record.text = TEXTS[record.page]
    store.upsert_document(schema, records, embeddings)
    yield store
    store.close()


def graph(levers: RoundLevers, scope: PageFilter) -> ReferenceGraph:
    return run(levers.reference_graph(DOC, "v1", scope))


def levers_on(store: PageStore) -> RoundLevers:
    return RoundLevers(store, None, LeverSettings(), SelectionSettings())  # type: ignore[arg-type]


def pages_in(found: ReferenceGraph) -> set[int]:
    linked = {b for a, links in found.links.items() for b in (a, *links)}
    return linked | {p for pages in found.definitions.values() for p in pages}


def test_a_filtered_graph_never_serves_an_unfiltered_query(store: PageStore) -> None:
    levers = levers_on(store)
    filtered = graph(levers, FIRST_TWO)
    assert pages_in(filtered) <= {1, 2}, "no link to a page outside the filter"
    fresh = graph(levers_on(store), OWNER)
    assert fresh.linked(1) == {4: "label"}
    assert graph(levers, OWNER).links == fresh.links
    assert graph(levers, FIRST_TWO).links == filtered.links


def test_a_caller_without_the_group_never_gets_the_cached_graph(store: PageStore) -> None:
    levers = levers_on(store)
    assert graph(levers, OWNER).linked(1) == {4: "label"}
    for outsider in (PageFilter(tenant="t1"), PageFilter(tenant="t2", acl_groups=("g1",))):
        assert len(graph(levers, outsider)) == 0 and not graph(levers, outsider).definitions
