"""A query pins each document's version when it first meets it: a re-index between its rounds
never mixes two versions of a document into what it reads or returns (on both real stores)."""

from __future__ import annotations

from fakes_docmemo import BagOfWordsEncoder, GoldReader
from stores_docmemo import add_document

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, ReaderInput
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.types import PageRef

QUESTION = "what was the segment margin in 2023"
DOC = "report.pdf"


def pages(version: str) -> list[str]:
    """Twelve pages, each text starting with its version; every page of v2 matches the question
    better than any page of v1."""
    if version == "v2":
        return [f"v2 segment margin in 2023 was {p} percent" for p in range(1, 13)]
    texts = [f"v1 filler page {p} about office plants" for p in range(1, 13)]
    texts[2] = "v1 the segment margin was discussed"
    return texts


class ReindexingReader(GoldReader):
    """Reads like :class:`GoldReader` (page 3 useful; never answers: page 99 does not exist);
    after its first reading the document is indexed again with new content, as a concurrent
    ingest does."""

    def __init__(self, store: PageStore) -> None:
        super().__init__({PageRef(DOC, 3), PageRef(DOC, 99)}, refine="segment margin 2023 percent")
        self.store = store

    def read(self, inp: ReaderInput) -> Feedback:
        if not self.inputs:
            add_document(self.store, DOC, pages("v2"), version="v2")
        return super().read(inp)


def test_a_reindex_between_rounds_never_mixes_versions(open_store) -> None:
    store = open_store()
    add_document(store, DOC, pages("v1"))
    reader = ReindexingReader(store)
    engine = DocMemoQueryEngine.from_defaults(
        store=store,
        encoder=BagOfWordsEncoder(),
        reader=reader,
        config=DocMemoConfig(rounds=3, pages_per_round=2, candidates=12),
        evidence_images=False,
    )
    response = engine.query(QUESTION)
    assert store.document_version(DOC) == "v2"  # the re-index happened during the query
    assert len(reader.inputs) >= 2  # rounds after it searched the new version's pages
    shown = [(page.ref, page.text.split()[0]) for inp in reader.inputs for page in inp.pages]
    assert shown and {version for _, version in shown} == {"v1"}, shown
    returned = [
        (n.node.metadata["doc_version"], n.node.get_content()) for n in response.source_nodes
    ]
    assert returned and all(v == "v1" and text.startswith("v1") for v, text in returned), returned
