"""ACL semantics, deny by default, on a real embedded store through the query engine.

A caller without groups sees only documents without an ACL; a document with an ACL is visible
only to callers holding one of its groups; documents without an ACL stay visible to every caller
of the tenant. Checked on what reaches the reader (the LLM's seat), the evidence and the trace.
"""

from __future__ import annotations

import pytest
from safety_worker import DIM, HashEncoder, write_pdf

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, Reader, ReaderInput
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.store.scope import PageFilter

ENCODER = HashEncoder()


class RecordingReader(Reader):
    """Stands in for the LLM: records every page it is shown, never stops early."""

    name = "recording"

    def __init__(self) -> None:
        self.shown: set[str] = set()

    def read(self, inp: ReaderInput) -> Feedback:
        self.shown |= {page.ref.doc_id for page in inp.pages}
        return Feedback(status="need_more")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("acl")
    budget = "The budget for next year is 40 million; the budget plan is approved."
    with EdgePageStore(root / "store", encoder_name=ENCODER.name, dim=DIM, sparse=True) as store:
        indexer = DocumentIndexer(store, ENCODER, ocr=False)
        for name, acl in (
            ("public.pdf", None),
            ("finance.pdf", ["finance"]),
            ("hr.pdf", ["hr", "board"]),
        ):
            pdf = write_pdf(root / name.removesuffix(".pdf") / name, [f"{name}: {budget}"] * 3)
            assert indexer.index_paths([pdf], tenant="acme", acl=acl).ok
        yield store


@pytest.mark.parametrize(
    ("groups", "visible"),
    [
        (None, {"public.pdf"}),
        ((), {"public.pdf"}),
        (("finance",), {"public.pdf", "finance.pdf"}),
        (("board",), {"public.pdf", "hr.pdf"}),
        (("finance", "hr"), {"public.pdf", "finance.pdf", "hr.pdf"}),
        (("marketing",), {"public.pdf"}),
    ],
)
def test_acl_is_deny_by_default_on_every_path(store, groups, visible) -> None:
    scope = PageFilter(tenant="acme", acl_groups=groups)
    reader = RecordingReader()
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=ENCODER,
        reader=reader,
        config=DocMemoConfig(rounds=3, pages_per_round=4),
        page_filter=scope,
    )
    result = engine.run("What is the budget for next year?")
    assert reader.shown == visible, "exactly the permitted documents reach the reader"
    assert {p.doc_id for p in result.trace.pages_read} == visible
    assert {s.doc_id for s in store.list_documents(scope)} == visible
    assert store.count_pages(scope) == 3 * len(visible)
    hits = store.search(ENCODER.encode_query("budget"), limit=20, page_filter=scope)
    assert {h.record.doc_id for h in hits} == visible


def test_no_tenant_sees_no_tenant_documents(store) -> None:
    assert store.list_documents(PageFilter(acl_groups=("finance", "hr"))) == []
    assert store.count_pages(PageFilter(tenant="other", acl_groups=("finance",))) == 0
