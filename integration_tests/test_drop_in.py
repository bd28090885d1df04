"""The drop-in path as a LlamaIndex app builder takes it: LlamaIndex's own LLM classes, the
``SimpleDirectoryReader`` -> ``DocMemoIndex.from_documents`` -> ``as_query_engine`` path over
nested folders, structured output in each class's native form, page images where the model
takes them, text where the server refuses them.

Every LLM class talks to a scripted server on 127.0.0.1 speaking its real protocol: the OpenAI
chat-completions API (``fake_vllm_server``) for ``OpenAI`` / ``OpenAILike`` /
``OpenAICompatible``, Ollama's ``/api/chat`` (``fake_ollama_server``) for ``Ollama``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pymupdf
import pytest
from fake_ollama_server import FakeOllama, OllamaRequest
from fake_vllm_server import FakeVLLM, Reply, Request, gold_reading
from llama_index.core import Settings, SimpleDirectoryReader
from llama_index.core.prompts import PromptTemplate
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike
from pydantic import BaseModel

from llama_index_docmemo import (
    DocMemoConfig,
    DocMemoIndex,
    OpenAICompatible,
    default_encoder,
    open_store,
)
from llama_index_docmemo.cli import main
from llama_index_docmemo.llms.image_policy import image_tokens
from llama_index_docmemo.llms.servers import ServerMemory, server_key

QUESTION = "What was the retail segment margin in 2023?"
GOLD = {("2023/10k.pdf", 7)}
CONFIG = DocMemoConfig(rounds=2, pages_per_round=3, candidates=12, adaptive_granularity=False)


def write_pdf(path: Path, pages: dict[int, str], n_pages: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for number in range(1, n_pages + 1):
        body = pages.get(number, f"Page {number}. Notes on office plants and parking rules.")
        doc.new_page().insert_text((72, 72), body, fontsize=11)
    doc.save(path)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two filings named 10k.pdf in two folders, and a memo: the layout of a real share."""
    root = tmp_path_factory.mktemp("reports")
    margin = "Segment margin table 2023. Retail segment margin 12 percent, wholesale 4 percent."
    write_pdf(root / "2023" / "10k.pdf", {3: "Revenue 2023 overview.", 7: margin}, 10)
    write_pdf(root / "2024" / "10k.pdf", {5: "Retail segment margin 2024 was 14 percent."}, 8)
    write_pdf(root / "memos" / "memo.pdf", {2: "Memo: retail segment margin targets."}, 6)
    return root


@pytest.fixture(scope="module")
def documents(folder: Path) -> list:
    return SimpleDirectoryReader(str(folder), recursive=True).load_data()


@pytest.fixture(scope="module")
def index(documents, tmp_path_factory: pytest.TempPathFactory) -> DocMemoIndex:
    store = open_store(path=tmp_path_factory.mktemp("store") / "s", encoder=default_encoder())
    built = DocMemoIndex.from_documents(documents, store=store)
    yield built
    store.close()


@pytest.fixture(autouse=True)
def no_settings_llm():
    """Each test starts with no ``Settings.llm`` and leaves none behind (the public setter
    cannot unset it; tests may reset LlamaIndex's private slot, the package never reads it)."""
    saved = Settings._llm
    Settings._llm = None
    yield
    Settings._llm = saved


def reading(text: str) -> str:
    """A scripted reader's JSON: 2023/10k.pdf p.7 is the evidence, answered once seen."""
    return gold_reading(text, GOLD, refined="segment margin table 2023")


def reader(request: Request) -> Reply:
    return Reply(reading(request.text))


def reading_requests(server: FakeVLLM) -> list[Request]:
    return [r for r in server.requests if "Question:" in r.text]


# -- the index ---------------------------------------------------------------------------------
def test_from_documents_groups_reader_pages_into_documents_with_relative_ids(index) -> None:
    docs = {s.doc_id: s for s in index.store.list_documents(index.scope())}
    assert set(docs) == {"2023/10k.pdf", "2024/10k.pdf", "memos/memo.pdf"}
    assert docs["2023/10k.pdf"].n_pages == 10 and docs["memos/memo.pdf"].n_pages == 6
    assert Path(docs["2024/10k.pdf"].source).is_absolute()
    assert index.report is not None and index.report.ok and index.report.pages == 24


def test_as_retriever_honours_top_k_and_file_name_filters_over_nested_folders(index) -> None:
    memo = MetadataFilters(filters=[MetadataFilter(key="file_name", value="memo.pdf")])
    nodes = index.as_retriever(similarity_top_k=3, filters=memo).retrieve("office plants")
    assert len(nodes) == 3
    assert {n.node.metadata["file_name"] for n in nodes} == {"memo.pdf"}
    both = MetadataFilters(filters=[MetadataFilter(key="file_name", value="10k.pdf")])
    pages = index.as_retriever(similarity_top_k=12, filters=both).retrieve("retail segment margin")
    assert {n.node.metadata["doc_id"] for n in pages} == {"2023/10k.pdf", "2024/10k.pdf"}
    one = MetadataFilters(filters=[MetadataFilter(key="doc_id", value="2024/10k.pdf")])
    nodes = index.as_retriever(similarity_top_k=5, filters=one).retrieve("retail segment margin")
    assert {n.node.ref_doc_id for n in nodes} == {"2024/10k.pdf"}
    paths = {n.node.metadata["file_path"] for n in nodes}
    assert paths == {str(Path(index.root or "").resolve() / "2024" / "10k.pdf")}


def test_store_none_is_an_embedded_store_in_the_documented_place(
    documents, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCMEMO_STORE_DIR", str(tmp_path / "data"))
    memo = [d for d in documents if d.metadata["file_name"] == "memo.pdf"]
    built = DocMemoIndex.from_documents(memo)
    try:
        assert (tmp_path / "data").is_dir()
        assert [s.doc_id for s in built.store.list_documents(built.scope())] == ["memo.pdf"]
    finally:
        built.store.close()


def test_insert_refresh_and_delete_keep_the_index_current(folder: Path, tmp_path: Path) -> None:
    write_pdf(tmp_path / "a" / "x.pdf", {1: "Quokka census 2023: 411 animals."}, 3)
    write_pdf(tmp_path / "b" / "y.pdf", {2: "Zebra census 2023: 90 animals."}, 2)
    docs = SimpleDirectoryReader(str(tmp_path), recursive=True, required_exts=[".pdf"]).load_data()
    store = open_store(path=tmp_path / "store", encoder=default_encoder())
    try:
        index = DocMemoIndex.from_documents(
            [d for d in docs if "x.pdf" in d.metadata["file_name"]], store=store, root=tmp_path
        )
        assert [s.doc_id for s in store.list_documents(index.scope())] == ["a/x.pdf"]
        index.insert(next(d for d in docs if d.metadata["file_name"] == "y.pdf"))
        ids = sorted(s.doc_id for s in store.list_documents(index.scope()))
        assert ids == ["a/x.pdf", "b/y.pdf"]
        y = next(s for s in store.list_documents(index.scope()) if s.doc_id == "b/y.pdf")
        assert y.n_pages == 2  # the whole file, from one page Document
        assert index.refresh_ref_docs(docs) == [False] * len(docs)  # nothing changed
        write_pdf(tmp_path / "a" / "x.pdf", {1: "Quokka census 2023: 412 animals."}, 3)
        fresh = SimpleDirectoryReader(str(tmp_path / "a"), required_exts=[".pdf"]).load_data()
        assert index.refresh_ref_docs(fresh) == [True] * len(fresh)
        hit = index.as_retriever(similarity_top_k=1).retrieve("zebra census")[0]
        index.delete_ref_doc(hit.node.ref_doc_id)
        assert [s.doc_id for s in store.list_documents(index.scope())] == ["a/x.pdf"]
    finally:
        store.close()


# -- LlamaIndex's own LLM classes -----------------------------------------------------------------
def test_openai_gpt4o_reads_page_images_with_its_native_structured_output(index) -> None:
    """The issue's done-when: Settings.llm = OpenAI("gpt-4o") on the drop-in path."""
    with FakeVLLM([], default=reader, model="gpt-4o", flavour="openai") as server:
        Settings.llm = OpenAI(model="gpt-4o", api_base=server.url, api_key="sk-test", max_retries=0)
        response = index.as_query_engine(config=CONFIG).query(QUESTION)
    requests = reading_requests(server)
    assert server.problems == [] and str(response) == "12 percent"
    assert requests and all(len(r.image_sizes) == 3 for r in requests)  # every page as an image
    form = requests[0].body["response_format"]
    assert form["type"] == "json_schema" and form["json_schema"]["name"] == "FeedbackReply"
    assert "useful_pages" in form["json_schema"]["schema"]["properties"]
    assert "validates against this JSON schema" not in requests[0].text  # not pasted in
    trace = response.metadata["docmemo"]
    assert trace["reader"] == "llm" and trace["images"] is True
    assert "gpt-4o" in trace["images_reason"]
    assert sum(r["images"] for r in trace["rounds"]) == sum(len(r.image_sizes) for r in requests)
    estimated = sum(image_tokens("openai", *size) for r in requests for size in r.image_sizes)
    assert sum(r["image_tokens"] for r in trace["rounds"]) == estimated > 0


def test_openai_like_gets_text_and_the_schema_in_the_prompt_unless_images_are_on(index) -> None:
    with FakeVLLM([], default=reader, model="local-model") as server:
        llm = OpenAILike(
            model="local-model",
            api_base=server.url,
            api_key="x",
            is_chat_model=True,
            context_window=32768,
            max_retries=0,
        )
        text = index.as_query_engine(llm=llm, config=CONFIG).query(QUESTION)
        first = reading_requests(server)[0]
        assert first.image_sizes == [] and "response_format" not in first.body
        assert "validates against this JSON schema" in first.text
        assert isinstance(first.body["messages"][1]["content"], str)  # plain string content
        assert text.metadata["docmemo"]["images"] is False
        server.requests.clear()
        seen = index.as_query_engine(llm=llm, config=CONFIG, images=True).query(QUESTION)
    assert str(seen) == "12 percent"
    assert all(len(r.image_sizes) == 3 for r in reading_requests(server))


def test_ollama_vision_model_gets_images_and_its_format_schema(index) -> None:
    from llama_index.llms.ollama import Ollama

    def answer(request: OllamaRequest) -> str:
        return reading(request.text)

    with FakeOllama(answer, model="qwen2.5vl:7b") as server:
        llm = Ollama(model="qwen2.5vl:7b", base_url=server.url, request_timeout=30)
        response = index.as_query_engine(llm=llm, config=CONFIG).query(QUESTION)
    chats = [r for r in server.requests if "Question:" in r.text]
    assert str(response) == "12 percent" and chats
    assert all(len(r.image_sizes) == 3 for r in chats)
    assert chats[0].schema is not None and "useful_pages" in chats[0].schema["properties"]
    assert response.metadata["docmemo"]["rounds"][0]["prompt_tokens"] > 0  # Ollama's counts


def test_ollama_model_without_vision_is_asked_again_as_text_and_remembered(index, caplog) -> None:
    from llama_index.llms.ollama import Ollama

    with FakeOllama(lambda r: reading(r.text), model="llama3.1", vision=False) as server:
        llm = Ollama(model="llama3.1", base_url=server.url, request_timeout=30)
        engine = index.as_query_engine(llm=llm, config=CONFIG, images=True)
        with caplog.at_level(logging.WARNING):
            first = engine.query(QUESTION)
            second = engine.query(QUESTION)
    chats = [r for r in server.requests if "Question:" in r.text]
    assert str(first) == str(second) == "12 percent"
    assert chats[0].image_sizes and not any(r.image_sizes for r in chats[1:])  # refused once
    assert caplog.text.count("refused image content") == 1


def test_engines_learn_a_refusal_apart_unless_the_app_shares_a_memory(index, caplog) -> None:
    from llama_index.llms.ollama import Ollama

    shared = ServerMemory()
    with FakeOllama(lambda r: reading(r.text), model="llama3.1", vision=False) as server:
        llm = Ollama(model="llama3.1", base_url=server.url, request_timeout=30)
        with caplog.at_level(logging.WARNING):
            for _ in range(2):  # two engines, each with a memory of its own
                index.as_query_engine(llm=llm, config=CONFIG, images=True).query(QUESTION)
            apart = caplog.text.count("refused image content")
            for _ in range(2):
                engine = index.as_query_engine(
                    llm=llm, config=CONFIG, images=True, server_memory=shared
                )
                assert str(engine.query(QUESTION)) == "12 percent"
    assert apart == 2 and caplog.text.count("refused image content") == 3
    assert shared.get(server_key(llm)).refuses_images


def test_a_llama_cpp_text_model_refusing_list_content_completes_docmemo_ask(
    folder: Path, tmp_path: Path, capsys, caplog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``docmemo ask --llm-url <llama.cpp with a text model>`` without ``--llm-images off``: the
    server's 500 on list content is recognised, not retried, and the request sent as text."""
    monkeypatch.setenv("DOCMEMO_LLM_TIMEOUT", "30")
    store = str(tmp_path / "store")
    assert main(["index", str(folder), "--store", store, "--quiet", "--ocr", "off"]) == 0
    capsys.readouterr()
    server = FakeVLLM(
        [], default=reader, model="smollm2", flavour="llama_cpp", text_model="llama_cpp"
    )
    args = ["ask", QUESTION, "--store", store, "--json", "-k", "3", "--rounds", "2"]
    with server, caplog.at_level(logging.WARNING):
        code = main([*args, "--llm-url", server.url, "--llm-model", "smollm2"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer"] == "12 percent" and out["images"] is False
    assert len([r for r in server.refusals if "concatenate" in r]) == 1  # not retried, remembered
    assert caplog.text.count("refused image content") == 1
    texts = [r for r in server.requests if "Question:" in r.text and not r.image_sizes]
    assert texts and all(isinstance(r.body["messages"][1]["content"], str) for r in texts)


def test_openai_compatible_structured_predict_serves_any_llamaindex_code() -> None:
    class Answer(BaseModel):
        """The answer and the page it stands on."""

        answer: str
        page: int

    with FakeVLLM(
        [], default=Reply('{"answer": "12 percent", "page": 7}'), model="m", flavour="llama_cpp"
    ) as server:
        llm = OpenAICompatible(model="m", api_base=server.url, max_retries=0)
        got = llm.structured_predict(Answer, PromptTemplate("Margin of {year}?"), year="2023")
        structured = llm.as_structured_llm(Answer).complete("Margin of 2023?")
    assert got == Answer(answer="12 percent", page=7)
    assert json.loads(structured.text) == {"answer": "12 percent", "page": 7}
    forms = [(r.body.get("response_format") or {}).get("type") for r in server.requests]
    assert forms == ["json_object", "json_object"]  # served: in the form llama.cpp takes
    assert len(server.refusals) == 1 and "json_object" in server.refusals[0]  # json_schema, once


# -- no LLM anywhere -----------------------------------------------------------------------------
def test_without_any_llm_a_warning_says_how_to_set_one_and_the_trace_says_offline(
    index, caplog
) -> None:
    with caplog.at_level(logging.WARNING, logger="llama_index_docmemo.query_engine"):
        engine = index.as_query_engine(config=CONFIG)
    assert "Settings.llm" in caplog.text and "offline reader" in caplog.text
    response = engine.query(QUESTION)
    assert response.metadata["docmemo"]["reader"] == "offline"
    assert response.metadata["docmemo"]["images"] is False
