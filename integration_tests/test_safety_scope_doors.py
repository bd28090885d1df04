"""No door widens a caller: every filter, page_filter and per-query scope only narrows identity.

Two tenants hold documents of the same names (a public ``report.pdf``, an ACL-protected
``memo.pdf``) beside a document without a tenant, on both backends (Qdrant Edge on disk, and
qdrant-client against the REST stand-in). A tenant-A caller without groups
(``DocMemoIndex.from_store(store, tenant="A")``) may read A's public report only. Each hostile
scope goes through every door a Python app has (retriever sync/async, query engine
``query``/``aquery``/``run``/``arun``/streaming, ``page_filter=`` on the engine, the chat
engine, an engine built directly) and through the CLI; each must either be refused with
:class:`IdentityError` or read nothing but A's public pages. What is checked is what the reader
(the LLM's seat) was shown, the source nodes and the trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from qdrant_standin import serve_standin
from safety_worker import write_pdf

from llama_index_docmemo import DocMemoIndex, IdentityError
from llama_index_docmemo.cli import main
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.base import Feedback, Reader, ReaderInput
from llama_index_docmemo.retriever import DocMemoRetriever
from llama_index_docmemo.store import open_store
from llama_index_docmemo.store.scope import PageFilter

ENCODER = default_encoder()
CONFIG = DocMemoConfig(rounds=2, pages_per_round=4, candidates=20)
QUESTION = "What does the report say about the budget and revenue?"
MARKS = ("APUBLIC", "APROTECTED", "BPUBLIC", "BPROTECTED", "NOTENANT")
ALLOWED = "APUBLIC"


def mf(*filters: MetadataFilter | MetadataFilters, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(filters), condition=FilterCondition(condition))


def eq(key: str, value: object, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)  # type: ignore[arg-type]


REFUSED = {
    "tenant == B": mf(eq("tenant", "B")),
    "tenant in [B]": mf(eq("tenant", ["B"], FilterOperator.IN)),
    "tenant in [A, B]": mf(eq("tenant", ["A", "B"], FilterOperator.IN)),
    "tenant == B and acl == bfin": mf(eq("tenant", "B"), eq("acl", "bfin")),
    "acl == afin": mf(eq("acl", "afin")),
    "acl_groups any [afin]": mf(eq("acl_groups", ["afin"], FilterOperator.ANY)),
    "tenant == A and acl == afin": mf(eq("tenant", "A"), eq("acl", "afin")),
    "tenant == B or file_name": mf(
        eq("tenant", "B"), eq("file_name", "report.pdf"), condition="or"
    ),
    "not (tenant != B)": mf(eq("tenant", "B", FilterOperator.NE), condition="not"),
    "nested tenant == B": mf(mf(mf(eq("tenant", "B")), eq("page", 1), condition="or")),
    "tenant_key == B": mf(eq("tenant_key", "B")),
    "access == afin": mf(eq("access", "afin")),
    "sentinel tenant": mf(eq("tenant", "\x00no-tenant")),
    "sentinel access": mf(eq("access", "\x00public")),
    "PageFilter tenant B": PageFilter(tenant="B"),
    "PageFilter tenant B + group": PageFilter(tenant="B", acl_groups=("bfin",)),
    "PageFilter group afin": PageFilter(acl_groups=("afin",)),
    "PageFilter sentinel": PageFilter(tenant="\x00no-tenant"),
}
NARROWING = {  # legal scopes: each may read A's public pages at most
    "none": None,
    "tenant == A": mf(eq("tenant", "A")),
    "tenant != B": mf(eq("tenant", "B", FilterOperator.NE)),
    "file_name == memo.pdf": mf(eq("file_name", "memo.pdf")),
    "file_name == report.pdf": mf(eq("file_name", "report.pdf")),
    "doc_id in [memo, report]": mf(eq("doc_id", ["memo.pdf", "report.pdf"], FilterOperator.IN)),
    "PageFilter doc_ids": PageFilter(doc_ids=("memo.pdf", "report.pdf")),
    "PageFilter tenant A, no groups": PageFilter(tenant="A", acl_groups=()),
}


class RecordingReader(Reader):
    """The LLM's seat: records the text of every page shown, never stops early."""

    name = "recording"

    def __init__(self) -> None:
        self.shown: list[str] = []

    def read(self, inp: ReaderInput) -> Feedback:
        self.shown += [page.text for page in inp.pages]
        return Feedback(status="need_more")


def write_corpus(root: Path) -> list[tuple[Path, str | None, list[str] | None]]:
    """(pdf, tenant, acl): the same names in A and B, one protected file each, one untenanted."""
    budget = "The budget and revenue of the report: revenue grew, the budget is approved."
    files = []
    for tenant, folder in (("A", "a"), ("B", "b")):
        public = write_pdf(root / folder / "report.pdf", [f"{tenant}PUBLIC {budget}"] * 3)
        protected = write_pdf(root / folder / "memo.pdf", [f"{tenant}PROTECTED {budget}"] * 2)
        files += [(public, tenant, None), (protected, tenant, [f"{tenant.lower()}fin"])]
    files.append((write_pdf(root / "none" / "report.pdf", [f"NOTENANT {budget}"] * 2), None, None))
    return files


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[tuple[Path, str | None, list[str] | None]]:
    return write_corpus(tmp_path_factory.mktemp("doors"))


@pytest.fixture(scope="module", params=["edge", "server"])
def store(request, corpus, tmp_path_factory) -> Iterator[tuple[object, list[str]]]:
    """The store, and the CLI options that open it."""
    with serve_standin() as (_, url):
        if request.param == "edge":
            path = tmp_path_factory.mktemp("edge") / "store"
            store, where = open_store(path=path, encoder=ENCODER), ["--store", str(path)]
        else:
            store, where = open_store(url=url, encoder=ENCODER, timeout=5), ["--url", url]
        indexer = DocumentIndexer(store, ENCODER, ocr=False)
        for pdf, tenant, acl in corpus:
            assert indexer.index_paths([pdf], tenant=tenant, acl=acl).ok
        yield store, where
        store.close()


def seen(texts: list[str]) -> set[str]:
    return {mark for mark in MARKS for text in texts if mark in text.split()}


def node_texts(nodes) -> list[str]:
    return [n.node.get_content() for n in nodes]


Door = Callable[[DocMemoIndex, object, RecordingReader], list[str]]


def _engine(index: DocMemoIndex, reader: RecordingReader, **kwargs) -> DocMemoQueryEngine:
    return index.as_query_engine(reader=reader, config=CONFIG, evidence_images=False, **kwargs)


def _streamed(index: DocMemoIndex, scope: object, reader: RecordingReader) -> list[str]:
    llm = MockLLM()
    engine = _engine(index, reader, filters=scope, streaming=True, llm=llm)
    response = engine.query(QUESTION)
    "".join(response.response_gen)
    return node_texts(response.source_nodes)


def _chat(index: DocMemoIndex, scope: object, reader: RecordingReader) -> list[str]:
    chat = index.as_chat_engine(
        filters=scope, reader=reader, config=CONFIG, evidence_images=False, chat_llm=MockLLM()
    )
    first = chat.chat(QUESTION)
    second = chat.chat("And what about tenant B's memo?")  # a turn naming another tenant
    return node_texts(first.source_nodes) + node_texts(second.source_nodes)


def _direct_engine(index: DocMemoIndex, scope: object, reader: RecordingReader) -> list[str]:
    engine = DocMemoQueryEngine.from_defaults(
        store=index.store,
        encoder=index.encoder,
        reader=reader,
        config=CONFIG,
        page_filter=PageFilter(tenant="A"),
        evidence_images=False,
    )
    return node_texts(engine.run(QUESTION, page_filter=scope).source_nodes)


DOORS: dict[str, Door] = {
    "as_retriever(filters).retrieve": lambda index, scope, _: node_texts(
        index.as_retriever(filters=scope, similarity_top_k=10).retrieve(QUESTION)
    ),
    "as_retriever(filters).aretrieve": lambda index, scope, _: node_texts(
        asyncio.run(index.as_retriever(filters=scope, similarity_top_k=10).aretrieve(QUESTION))
    ),
    "as_retriever(page_filter).retrieve": lambda index, scope, _: node_texts(
        index.as_retriever(page_filter=scope).retrieve(QUESTION)
    ),
    "as_query_engine(filters).query": lambda index, scope, reader: node_texts(
        _engine(index, reader, filters=scope).query(QUESTION).source_nodes
    ),
    "as_query_engine(filters).aquery": lambda index, scope, reader: node_texts(
        asyncio.run(_engine(index, reader, filters=scope).aquery(QUESTION)).source_nodes
    ),
    "as_query_engine(page_filter).query": lambda index, scope, reader: node_texts(
        _engine(index, reader, page_filter=scope).query(QUESTION).source_nodes
    ),
    "engine.run(page_filter)": lambda index, scope, reader: node_texts(
        _engine(index, reader).run(QUESTION, page_filter=scope).source_nodes
    ),
    "engine.arun(page_filter)": lambda index, scope, reader: node_texts(
        asyncio.run(_engine(index, reader).arun(QUESTION, page_filter=scope)).source_nodes
    ),
    "streaming query": _streamed,
    "as_chat_engine(filters).chat": _chat,
    "from_defaults(tenant A).run(page_filter)": _direct_engine,
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_no_door_widens_a_tenant_a_caller_without_groups(store, door: str) -> None:
    page_store, _ = store
    index = DocMemoIndex.from_store(page_store, ENCODER, tenant="A")
    for name, scope in REFUSED.items():
        reader = RecordingReader()
        with pytest.raises(IdentityError, match="identity is set|reserved|control"):
            DOORS[door](index, scope, reader)
        assert reader.shown == [], (door, name)
    for name, scope in NARROWING.items():
        reader = RecordingReader()
        got = seen(DOORS[door](index, scope, reader) + reader.shown)
        assert got <= {ALLOWED}, (door, name, got)
        if name == "none":
            assert got == {ALLOWED}, (door, "the caller reads its own pages")


def test_a_caller_with_a_group_reads_that_group_only(store) -> None:
    page_store, _ = store
    index = DocMemoIndex.from_store(page_store, ENCODER, tenant="A", acl=["afin"])
    reader = RecordingReader()
    _engine(index, reader).run(QUESTION)
    assert seen(reader.shown) == {"APUBLIC", "APROTECTED"}
    narrowed = RecordingReader()
    _engine(index, narrowed, filters=PageFilter(acl_groups=())).run(QUESTION)
    assert seen(narrowed.shown) == {"APUBLIC"}  # fewer groups: narrower
    with pytest.raises(IdentityError):
        index.as_retriever(filters=mf(eq("acl", "bfin")))


def test_metadata_filters_never_set_the_caller_of_a_retriever(store) -> None:
    page_store, _ = store
    with pytest.raises(IdentityError, match="no tenant"):
        DocMemoRetriever(page_store, ENCODER, page_filter=mf(eq("tenant", "B")))
    untenanted = DocMemoRetriever(page_store, ENCODER, CONFIG, page_filter=PageFilter())
    assert seen(node_texts(untenanted.retrieve(QUESTION))) == {"NOTENANT"}


def test_reserved_names_are_refused_at_construction(store) -> None:
    page_store, _ = store
    for kwargs in ({"tenant": "\x00no-tenant"}, {"tenant": "A", "acl": ["\x00public"]}):
        with pytest.raises(IdentityError):
            DocMemoIndex.from_store(page_store, ENCODER, **kwargs)
    with pytest.raises(IdentityError):
        DocMemoQueryEngine.from_defaults(
            store=page_store, encoder=ENCODER, page_filter=PageFilter(tenant="\x00no-tenant")
        )


@pytest.mark.parametrize("backend", ["edge", "server"])
def test_the_cli_scopes_by_its_caller_and_refuses_reserved_names(
    backend: str, corpus, tmp_path: Path, capsys
) -> None:
    with serve_standin() as (_, url):
        where = ["--store", str(tmp_path / "store")] if backend == "edge" else ["--url", url]
        for pdf, tenant, acl in corpus:
            owner = ["--tenant", tenant] if tenant else []
            access = [option for group in acl or () for option in ("--acl", group)]
            assert main(["index", str(pdf), *where, "--ocr", "off", *owner, *access]) == 0
        capsys.readouterr()
        assert main(["ask", QUESTION, *where, "--tenant", "A", "--json"]) == 0
        answer = capsys.readouterr().out
        assert seen([answer]) == {ALLOWED}, answer
        assert main(["ask", QUESTION, *where, "--tenant", "\x00no-tenant", "--json"]) != 0
        assert "control characters" in capsys.readouterr().err
