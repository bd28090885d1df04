"""The host app's data contract, tried as a LlamaIndex app builder would (issue 25).

``SimpleDirectoryReader(file_metadata=...)`` over nested folders, ``DocMemoIndex.from_documents``,
LlamaIndex's own ``OpenAI`` class against a scripted OpenAI-compatible server (streaming too),
both store backends (Qdrant Edge in-process, qdrant-client against a Qdrant REST stand-in):
complete nodes, the app's metadata on nodes and in filters, unknown keys named, LlamaIndex's
arguments, and a store reopened in another process without ``encoder=``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from crops_pdfs import draw_table, make_report_pdf
from fake_vllm_server import FakeVLLM, Reply, Request, gold_reading
from llama_index.core import Settings, SimpleDirectoryReader
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.readers.file.base import default_file_metadata_func
from llama_index.core.schema import Document, NodeRelationship, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.llms.openai import OpenAI
from qdrant_standin import serve_standin

from llama_index_docmemo import (
    CropPostprocessor,
    DocMemoConfig,
    DocMemoIndex,
    IdentityError,
    default_encoder,
    open_store,
)
from llama_index_docmemo.cli import main
from llama_index_docmemo.ingest.layout import DetectOptions

QUESTION = "What was the retail segment margin in 2023?"
MARGIN = "Segment margin table 2023. Retail segment margin 12 percent, wholesale 4 percent."
CONFIG = DocMemoConfig(rounds=2, pages_per_round=3, candidates=12, adaptive_granularity=False)
EXTRA = {"2023": {"year": 2023, "team": "finance"}, "2024": {"year": 2024, "team": "risk"}}
ROOT = Path(__file__).resolve().parents[1]


def write_pdf(path: Path, pages: dict[int, str], n_pages: int, table: int = 0) -> None:
    """A PDF of ``n_pages`` pages; page ``table`` also holds a ruled table (crops come of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for number in range(1, n_pages + 1):
        body = pages.get(number, f"Page {number}. Notes on office plants and parking rules.")
        page = doc.new_page()
        page.insert_text((72, 72), body, fontsize=11)
        if number == table:
            draw_table(page, 72, 220, "Table 3: Segment margin by region in 2023")
    doc.save(path)


def file_metadata(path: str) -> dict:
    """The reader's own keys, plus the app's: year and team from the folder."""
    return {**default_file_metadata_func(path), **EXTRA.get(Path(path).parts[-3], {})}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2023/finance/10k.pdf, 2024/risk/10k.pdf, memos/memo.pdf and a corrupt memos/broken.pdf."""
    root = tmp_path_factory.mktemp("reports")
    write_pdf(root / "2023" / "finance" / "10k.pdf", {3: "Revenue 2023.", 7: MARGIN}, 10, table=7)
    write_pdf(root / "2024" / "risk" / "10k.pdf", {5: "Retail segment margin 2024: 14%."}, 8)
    write_pdf(root / "memos" / "memo.pdf", {2: "Memo: retail segment margin targets."}, 6)
    (root / "memos" / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a PDF body\n")
    return root


@pytest.fixture(scope="module")
def documents(folder: Path) -> list[Document]:
    reader = SimpleDirectoryReader(str(folder), recursive=True, file_metadata=file_metadata)
    return reader.load_data()  # prints "Failed to load file .../broken.pdf" and goes on


@pytest.fixture(scope="module", params=["edge", "server"])
def backend(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Where a store lives: an Edge folder, or the URL of a Qdrant REST stand-in."""
    if request.param == "edge":
        yield str(tmp_path_factory.mktemp("edge") / "store")
        return
    with serve_standin() as (_, url):
        yield url


def store_at(where: str):
    encoder = default_encoder()
    if where.startswith("http"):
        return open_store(url=where, encoder=encoder)
    return open_store(path=where, encoder=encoder)


@pytest.fixture(scope="module")
def index(documents, backend: str) -> Iterator[DocMemoIndex]:
    built = DocMemoIndex.from_documents(documents, store=store_at(backend))
    yield built
    built.store.close()


@pytest.fixture(autouse=True)
def no_settings_llm():
    """No ``Settings.llm`` / ``embed_model`` before or after (the public setters cannot unset
    them; the tests reset LlamaIndex's private slots, the package never reads them)."""
    saved = Settings._llm, Settings._embed_model
    Settings._llm, Settings._embed_model = None, None
    yield
    Settings._llm, Settings._embed_model = saved


def reading(request: Request) -> Reply:
    """A scripted reader: 2023/finance/10k.pdf p.7 is the evidence; the reranker keeps its
    order; other prompts (condensing, final answers, the stock engine) get plain text."""
    properties = (request.schema or {}).get("properties", {})
    if "pages" in properties:
        return Reply(json.dumps({"pages": [1]}))
    if "useful_pages" not in properties:
        return Reply("The retail segment margin was 12 percent in 2023.")
    gold = {("2023/finance/10k.pdf", 7)}
    return Reply(gold_reading(request.text, gold, refined="segment margin table 2023"))


def openai_server() -> FakeVLLM:
    """OpenAI's API as the scripted server speaks it (answers without a schema too: the
    condensing and final-answer calls)."""
    return FakeVLLM([], default=reading, model="gpt-4o", flavour="openai", require_schema=False)


def gpt4o(server: FakeVLLM) -> OpenAI:
    return OpenAI(model="gpt-4o", api_base=server.url, api_key="sk-test", max_retries=0)


def filters(*conditions: MetadataFilter, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(conditions), condition=FilterCondition(condition))


# -- complete nodes ----------------------------------------------------------------------------
PAGE_KEYS = {"file_name", "file_path", "page_label", "doc_id"}
READER_KEYS = {"file_type", "file_size", "creation_date", "last_modified_date"}


def test_evidence_and_retriever_nodes_carry_the_page_and_the_apps_metadata(index) -> None:
    with openai_server() as server:
        response = index.as_query_engine(llm=gpt4o(server), config=CONFIG).query(QUESTION)
    assert str(response) == "12 percent" and response.source_nodes
    evidence = response.source_nodes[0].node
    assert PAGE_KEYS | READER_KEYS | {"year", "team"} <= set(evidence.metadata)
    assert (evidence.metadata["file_name"], evidence.metadata["page_label"]) == ("10k.pdf", "7")
    assert evidence.metadata["year"] == 2023 and evidence.metadata["team"] == "finance"
    assert evidence.ref_doc_id == "2023/finance/10k.pdf"
    assert evidence.relationships[NodeRelationship.SOURCE].node_id == "2023/finance/10k.pdf"
    for hit in index.as_retriever(similarity_top_k=5).retrieve("retail segment margin"):
        assert PAGE_KEYS | READER_KEYS <= set(hit.node.metadata) and hit.node.ref_doc_id


def test_crop_nodes_add_their_box_and_kind_to_the_pages_metadata(tmp_path: Path) -> None:
    (tmp_path / "docs" / "2023" / "q").mkdir(parents=True)
    make_report_pdf(tmp_path / "docs" / "2023" / "q" / "report.pdf")
    docs = SimpleDirectoryReader(
        str(tmp_path / "docs"), recursive=True, file_metadata=file_metadata
    ).load_data()
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        index = DocMemoIndex.from_documents(docs, store=store)
        pages = index.as_retriever(similarity_top_k=1).retrieve("Revenue by region table")
        cropper = CropPostprocessor(
            cache_dir=str(tmp_path / "cache"), detect_options=DetectOptions(layout_model=False)
        )
        crops = [
            n
            for n in cropper.postprocess_nodes(pages, QueryBundle("revenue by region"))
            if n.node.metadata["kind"] != "page"
        ]
    assert crops
    for crop in crops:
        meta = crop.node.metadata
        assert PAGE_KEYS | {"year", "team", "bbox", "kind", "file_type"} <= set(meta)
        assert meta["kind"] in ("table", "chart", "figure") and len(meta["bbox"]) == 4
        assert crop.node.ref_doc_id == "report.pdf" and meta["year"] == 2023


def test_the_readme_quickstart_loop_prints_real_values(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The README's full "Use it from Python" block (after the before/after pair), run as
    written (OpenAI's API base and key from the environment, as the openai package reads them)."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Use it from Python") :]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    block = next(b for b in blocks if 'response.metadata["docmemo"]' in b)
    (tmp_path / "reports").symlink_to(folder, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCMEMO_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with openai_server() as server:
        monkeypatch.setenv("OPENAI_API_BASE", server.url)
        namespace: dict = {}
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
        namespace["index"].store.close()
    out = capsys.readouterr().out
    assert "12 percent" in out
    assert "10k.pdf 7 " in out  # file_name, page_label, score of the evidence page


def test_drop_in_example_prints_real_sources(folder: Path, tmp_path: Path) -> None:
    with FakeVLLM([], default=reading, model="qwen-vl", require_schema=False) as server:
        env = {**os.environ, "DOCMEMO_LLM_URL": server.url, "DOCMEMO_LLM_MODEL": "qwen-vl"}
        env["DOCMEMO_STORE_DIR"] = str(tmp_path / "store")
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "drop_in.py"), str(folder), QUESTION],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    assert run.returncode == 0, run.stderr
    docmemo = run.stdout[run.stdout.index("[DocMemoIndex]") :]
    assert "source: 10k.pdf p.7" in docmemo and "None" not in docmemo


# -- the app's metadata ------------------------------------------------------------------------
def retrieved(index: DocMemoIndex, scope: MetadataFilters, k: int = 30) -> set[tuple[str, int]]:
    nodes = index.as_retriever(similarity_top_k=k, filters=scope).retrieve("retail margin")
    return {(n.node.metadata["doc_id"], n.node.metadata["year"]) for n in nodes}


def test_the_apps_keys_filter_with_llamaindex_operators(index) -> None:
    year = "2023/finance/10k.pdf", 2023
    later = "2024/risk/10k.pdf", 2024
    assert retrieved(index, filters(MetadataFilter(key="year", value=2023))) == {year}
    gte = MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE)
    assert retrieved(index, filters(gte)) == {later}
    teams = MetadataFilter(key="team", value=["risk", "finance"], operator=FilterOperator.IN)
    assert retrieved(index, filters(teams)) == {year, later}
    either = filters(
        MetadataFilter(key="team", value="risk"),
        MetadataFilter(key="year", value=2023),
        condition="or",
    )
    assert retrieved(index, either) == {year, later}
    pdf = MetadataFilter(key="file_type", value="application/pdf")
    assert len(index.as_retriever(similarity_top_k=30, filters=filters(pdf)).retrieve("x")) == 24


def test_a_filter_on_a_key_no_document_has_is_named_in_a_warning(index, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        nodes = index.as_retriever(
            filters=filters(MetadataFilter(key="yeer", value=2023))
        ).retrieve("margin")
    assert nodes == [] and "'yeer'" in caplog.text and "no document in scope" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        index.as_query_engine(filters=filters(MetadataFilter(key="year", value=2023)))
    assert "no document in scope" not in caplog.text


def test_metadata_cannot_set_identity_and_is_named_when_refused(tmp_path: Path) -> None:
    sneaky = Document(
        text="Quokka census 2023: 411 animals.",
        metadata={"tenant": "other", "acl": ["admins"], "kind": "document", "team": "zoo"},
    )
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        index = DocMemoIndex.from_documents([sneaky], store=store, tenant="acme")
        (hit,) = index.as_retriever(similarity_top_k=1).retrieve("quokka census")
        assert hit.node.metadata["team"] == "zoo" and hit.node.metadata["kind"] == "page"
        assert "tenant" not in hit.node.metadata and "acl" not in hit.node.metadata
        (schema,) = store.list_documents(None)
        assert schema.tenant == "acme" and schema.acl == []
        assert any("'acl', 'kind', 'tenant'" in w for w in index.report.warnings)
        with pytest.raises(IdentityError):
            index.as_retriever(filters=filters(MetadataFilter(key="tenant", value="other")))


def test_docmemo_index_meta_is_stored_filterable_and_re_indexes_when_changed(
    folder: Path, tmp_path: Path, capsys
) -> None:
    store = str(tmp_path / "store")
    memos = str(folder / "memos" / "memo.pdf")
    args = ["index", memos, "--store", store, "--quiet", "--ocr", "off"]
    assert main([*args, "--meta", "year=2022", "--meta", "team=ops"]) == 0
    assert main([*args, "--meta", "year=2021", "--meta", "team=ops"]) == 0
    assert capsys.readouterr().out.count("indexed 1 documents") == 2  # changed: re-indexed
    assert main([*args, "--meta", "tenant=evil"]) == 2
    assert "'tenant' are reserved" in capsys.readouterr().err
    index = DocMemoIndex.from_store(store)  # no encoder: the store records it
    try:
        scope = filters(MetadataFilter(key="year", value=2021))
        nodes = index.as_retriever(similarity_top_k=6, filters=scope).retrieve("memo")
        assert len(nodes) == 6 and {n.node.metadata["team"] for n in nodes} == {"ops"}
    finally:
        index.store.close()


# -- reopen in one line ------------------------------------------------------------------------
REOPEN = """
import json, sys
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from llama_index_docmemo import DocMemoIndex
index = DocMemoIndex.from_store(sys.argv[1])
scope = MetadataFilters(filters=[MetadataFilter(key="team", value="risk")])
nodes = index.as_retriever(similarity_top_k=3, filters=scope).retrieve("retail segment margin")
print(json.dumps([n.node.metadata for n in nodes]))
index.store.close()
"""


def test_a_store_reopens_in_another_process_from_its_path_or_url(
    documents, backend: str, tmp_path: Path
) -> None:
    where = backend if backend.startswith("http") else str(tmp_path / "store")
    built = DocMemoIndex.from_documents(documents, store=store_at(where))
    built.store.close()  # an Edge folder has one owner at a time
    run = subprocess.run(
        [sys.executable, "-c", REOPEN, where], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    nodes = json.loads(run.stdout)
    assert len(nodes) == 3 and {n["file_path"] for n in nodes} == {
        str(built.root / "2024" / "risk" / "10k.pdf")
    }
    assert {n["year"] for n in nodes} == {2024}


def test_open_store_without_an_encoder_adopts_the_recorded_one(tmp_path: Path) -> None:
    with open_store(path=tmp_path / "s") as new:  # a new store: the default CPU encoder
        assert new.encoder_name == default_encoder().name
    with open_store(path=tmp_path / "s") as again:
        assert again.encoder_settings == default_encoder().settings()


def test_llamaindex_storage_calls_point_to_from_store(index) -> None:
    with pytest.raises(AttributeError, match=r"DocMemoIndex.from_store\("):
        index.storage_context.persist("./storage")
    with pytest.raises(AttributeError, match="load_index_from_storage cannot open it"):
        _ = index.docstore


# -- LlamaIndex's arguments --------------------------------------------------------------------
class Recorder(BaseNodePostprocessor):
    """An app's postprocessor: puts the memo's pages last and records what it saw."""

    seen: list[int] = []

    def _postprocess_nodes(self, nodes, query_bundle=None) -> list[NodeWithScore]:
        self.seen.append(len(nodes))
        return sorted(nodes, key=lambda n: n.node.metadata["file_name"] == "memo.pdf")


def test_as_query_engine_takes_llamaindex_arguments(index) -> None:
    recorder = Recorder()
    scope = filters(MetadataFilter(key="year", value=2023, operator=FilterOperator.LTE))
    with openai_server() as server:
        engine = index.as_query_engine(
            llm=gpt4o(server),
            config=CONFIG,
            similarity_top_k=2,
            node_postprocessors=[recorder],
            response_mode="compact",
            streaming=True,
            filters=scope,
        )
        response = engine.query(QUESTION)
        assert isinstance(response, StreamingResponse)
        text = "".join(response.response_gen)
    reads = [r for r in server.requests if "useful_pages" in str(r.schema)]
    assert "12 percent" in text and recorder.seen
    assert all(len(r.image_sizes) == 2 for r in reads)  # similarity_top_k pages a round
    assert {n.node.metadata["year"] for n in response.source_nodes} == {2023}


def test_arguments_docmemo_has_no_use_for_are_refused_by_name(index) -> None:
    with pytest.raises(ValueError, match="response_mode='tree_summarize'"):
        index.as_query_engine(response_mode="tree_summarize")
    with pytest.raises(TypeError, match="'text_qa_template'.*reader:system"):
        index.as_query_engine(text_qa_template="{context_str}")
    with pytest.raises(ValueError, match="similarity_top_k=51"):
        index.as_query_engine(similarity_top_k=51)
    pages = index.as_retriever(similarity_top_k=51).retrieve("retail segment margin")
    assert len(pages) == 24  # every page there is: retrieve() reads nothing, no reading cap


def test_chat_modes_answer_stream_and_refuse_by_name(index) -> None:
    with openai_server() as server:
        llm = gpt4o(server)
        chat = index.as_chat_engine(llm=llm, config=CONFIG)
        assert "12 percent" in str(chat.chat(QUESTION))
        streamed = chat.stream_chat("And in 2024?")
        tokens = list(streamed.response_gen)
        assert len(tokens) > 1 and "12 percent" in "".join(tokens)
        context = index.as_chat_engine(chat_mode="condense_plus_context", llm=llm)
        assert "12 percent" in "".join(context.stream_chat(QUESTION).response_gen)
    for mode, hint in (("react", "QueryEngineTool"), ("simple", "SimpleChatEngine")):
        with pytest.raises(ValueError, match=f"chat_mode='{mode}'.*{hint}"):
            index.as_chat_engine(chat_mode=mode)
    with pytest.raises(ValueError, match="'agent' is not a chat mode"):
        index.as_chat_engine(chat_mode="agent")


# -- what used to be silent --------------------------------------------------------------------
def test_files_the_reader_skipped_and_empty_lists_are_reported(
    documents, tmp_path: Path, caplog
) -> None:
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        index = DocMemoIndex.from_documents(documents, store=store)
        (failed,) = index.report.failed
        assert failed[0].endswith("memos/broken.pdf") and "reader skipped it" in failed[1]
        with caplog.at_level(logging.WARNING):
            empty = DocMemoIndex.from_documents([], store=store)
        assert "got no Documents" in caplog.text and empty.report.warnings


def test_settings_embed_model_is_said_to_be_unused(tmp_path: Path) -> None:
    from llama_index.core.embeddings import BaseEmbedding

    class AppEmbedding(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return [1.0]

        _get_query_embedding = _get_text_embedding

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return [1.0]

    Settings.embed_model = AppEmbedding()
    with (
        open_store(path=tmp_path / "store") as store,
        pytest.warns(UserWarning, match="Settings.embed_model .AppEmbedding. is not used"),
    ):
        DocMemoIndex.from_store(store)


def test_insert_and_delete_with_the_ids_an_app_has(folder: Path, tmp_path: Path, caplog) -> None:
    write_pdf(tmp_path / "other" / "2024" / "x.pdf", {1: "Zebra census: 90 animals."}, 2)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "faq.md").write_text("# FAQ\n\nThe parking permit costs 40 euros.")
    memo = SimpleDirectoryReader(str(folder / "memos"), required_exts=[".pdf"]).load_data()
    outside = SimpleDirectoryReader(str(tmp_path / "other"), recursive=True).load_data()
    faq = SimpleDirectoryReader(str(tmp_path / "notes")).load_data()
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        index = DocMemoIndex.from_documents(memo, store=store)
        index.insert(outside[0])  # outside the index's root: reported, not '../../other/x.pdf'
        assert index.report.failed and "is not inside" in index.report.failed[0][1]
        text = Document(text="Quokka census 2023: 411 animals.", metadata={"team": "zoo"})
        index.insert(text)  # no file: stored under its own doc_id
        (hit,) = index.as_retriever(similarity_top_k=1).retrieve("quokka census")
        assert hit.node.ref_doc_id == text.doc_id and hit.node.metadata["team"] == "zoo"
        index.delete_ref_doc(text.doc_id)
        with caplog.at_level(logging.WARNING):
            index.delete_ref_doc(memo[0].doc_id)  # one page Document of a 6-page file
        assert "delete_ref_doc('memo.pdf')" in caplog.text
        index.root = tmp_path
        index.insert(faq[0])
        index.delete_ref_doc(faq[0].doc_id)  # the reader's id of a one-Document file
        ids = [s.doc_id for s in store.list_documents(index.scope())]
    assert ids == ["memo.pdf"]
