"""Nothing the app gives is lost, merged or hidden (issue 42), through LlamaIndex's own classes
(``SimpleDirectoryReader``, ``DocMemoIndex.from_documents``) and the ``docmemo`` command.

A damaged PDF fails alone, named with its reason; files of one base name stay two documents
(with their page images); an index answers from its own Documents; ``delete_ref_doc`` of a page
Document's id means one thing; a query that ends at a deadline or an LLM failure says why and
still returns round 1's best pages.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import pymupdf
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from llama_index.core import SimpleDirectoryReader
from llama_index.core.schema import Document

from llama_index_docmemo import DocMemoIndex, default_encoder, open_store
from llama_index_docmemo.cli import main


def write_pdf(path: Path, n_pages: int, word: str) -> Path:
    """A PDF of ``n_pages`` full pages (about 6 KB each), each saying ``word`` and its number."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for number in range(1, n_pages + 1):
        page = doc.new_page()
        for line in range(30):
            page.insert_text((72, 72 + 20 * line), f"{word} section, page {number}, line {line}.")
    doc.save(path)
    return path


def load(folder: Path, **reader_options) -> list[Document]:
    """``SimpleDirectoryReader`` Documents (its prints of skipped files kept off the output)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return SimpleDirectoryReader(str(folder), recursive=True, **reader_options).load_data()


# -- 1. a damaged PDF fails alone ----------------------------------------------------------------
@pytest.mark.parametrize("keep", [1000, 3000, 20000])
def test_a_truncated_pdf_fails_alone_in_from_documents(tmp_path: Path, keep: int) -> None:
    folder = tmp_path / "docs"
    write_pdf(folder / "good.pdf", 4, "alpha")
    cut = write_pdf(folder / "cut.pdf", 40, "beta")
    cut.write_bytes(cut.read_bytes()[:keep])
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        index = DocMemoIndex.from_documents(load(folder), store=store)
        report = index.report
        stored = [s.doc_id for s in store.list_documents()]
    assert "good.pdf" in stored
    if report.failed:  # the reader gave nothing, or MuPDF and the reader both failed
        ((source, reason),) = report.failed
        assert Path(source).name == "cut.pdf" and reason and "\n" not in reason
        assert [Path(s).name for s in report.indexed] == ["good.pdf"] and stored == ["good.pdf"]
    else:  # the reader read the pages before the cut: kept, and the warning says what is missing
        assert any("cut.pdf" in w and "without page images" in w for w in report.warnings)


def test_docmemo_index_lists_the_bad_file_and_exits_by_what_worked(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "docs"
    write_pdf(folder / "good.pdf", 3, "alpha")
    cut = write_pdf(folder / "cut.pdf", 40, "beta")
    cut.write_bytes(cut.read_bytes()[:3000])
    store = ["--store", str(tmp_path / "store"), "--quiet", "--ocr", "off"]
    assert main(["index", str(folder), *store]) == 1  # some failed, the rest indexed
    out = capsys.readouterr().out
    assert "indexed 1 documents" in out and f"FAILED {cut}: " in out
    assert main(["list", "--store", str(tmp_path / "store")]) == 0
    assert "1 documents" in capsys.readouterr().out
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "cut.pdf").write_bytes(cut.read_bytes())
    assert main(["index", str(only_bad), *store]) == 3  # nothing worked
    assert "indexed 0 documents" in capsys.readouterr().out


GOOD_PDF = pymupdf.open()
for _number in range(1, 7):
    GOOD_PDF.new_page().insert_text((72, 72), f"gamma page {_number} " * 6)
GOOD_PDF.set_toc([[1, "Start", 1], [1, "End", 5]])
GOOD_BYTES = GOOD_PDF.tobytes()


@st.composite
def corrupted(draw: st.DrawFn) -> bytes:
    """The good PDF cut at a random offset, or with random bytes changed."""
    data = bytearray(GOOD_BYTES)
    if draw(st.booleans()):
        return bytes(data[: draw(st.integers(1, len(data) - 1))])
    for offset in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=24)):
        data[offset] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.fixture(scope="module")
def fuzz_indexer(tmp_path_factory: pytest.TempPathFactory):
    from llama_index_docmemo.indexing import DocumentIndexer

    encoder = default_encoder()
    with open_store(path=tmp_path_factory.mktemp("fuzz") / "store", encoder=encoder) as store:
        yield DocumentIndexer(store, encoder, ocr="off")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=corrupted())
@example(data=GOOD_BYTES[:450])  # MuPDF opens it, then raises on its page count
def test_no_corrupted_pdf_escapes_a_batch(fuzz_indexer, data: bytes) -> None:
    """Whatever the damage, the batch returns: the good file is indexed, the damaged one is
    indexed (MuPDF repaired it) or named as failed with a one-line reason."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "good.pdf").write_bytes(GOOD_BYTES)
        (folder / "bad.pdf").write_bytes(data)
        documents = load(folder)
        read = {Path(d.metadata["file_path"]).name for d in documents}
        reports = [
            (fuzz_indexer.index_paths([folder]), {"good.pdf", "bad.pdf"}),
            (
                DocMemoIndex.from_documents(documents, store=fuzz_indexer.store, ocr="off").report,
                read | {"good.pdf"},  # a reader that gives no Document and no error drops a file
            ),
        ]
        for report, given in reports:
            done = {Path(s).name for s in report.indexed + report.unchanged}
            failed = {Path(s).name: reason for s, reason in report.failed}
            assert "good.pdf" in done
            if "bad.pdf" in given:
                assert ("bad.pdf" in done) != ("bad.pdf" in failed)
            assert all(reason and "\n" not in reason for reason in failed.values())



# -- 2, 3. a document is its path, and its page images are found the same way -------------------
def year_only(path: str) -> dict:
    """The app's keys only: LlamaIndex then drops ``file_path`` (the PDF reader keeps the name)."""
    return {"year": 2023 if "/x/" in path else 2024}


@pytest.fixture
def two_reports(tmp_path: Path) -> Path:
    write_pdf(tmp_path / "docs" / "x" / "report.pdf", 5, "alpha")
    write_pdf(tmp_path / "docs" / "y" / "report.pdf", 3, "beta")
    return tmp_path / "docs"


def test_two_files_of_one_name_stay_two_documents_with_their_images(
    two_reports: Path, tmp_path: Path
) -> None:
    from llama_index_docmemo.ingest.pdf import render_page

    documents = load(two_reports, file_metadata=year_only, filename_as_id=True)
    assert not any("file_path" in d.metadata for d in documents)
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        index = DocMemoIndex.from_documents(documents, store=store)
        stored = {s.doc_id: s for s in store.list_documents()}
        assert {k: s.n_pages for k, s in stored.items()} == {"x/report.pdf": 5, "y/report.pdf": 3}
        for doc_id, schema in stored.items():
            assert Path(schema.source) == two_reports / doc_id
            assert render_page(schema.source, 1, 200).size[1] == 200  # the page image is there
        assert not [w for w in index.report.warnings if "without page images" in w]
        nodes = index.as_retriever(similarity_top_k=8).retrieve("beta section page 2")
        pages = {(n.node.metadata["doc_id"], n.node.metadata["page"]) for n in nodes}
        assert ("y/report.pdf", 2) in pages and len(pages) == len(nodes)
        assert {n.node.metadata["year"] for n in nodes if n.node.ref_doc_id == "y/report.pdf"} == {
            2024
        }


def test_documents_that_do_not_say_which_file_are_refused_naming_it(
    two_reports: Path, tmp_path: Path
) -> None:
    from llama_index_docmemo import DocumentIdentityError

    documents = load(two_reports, file_metadata=year_only)  # ids: random uuids
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        with pytest.raises(DocumentIdentityError, match="'report.pdf'.*filename_as_id=True"):
            DocMemoIndex.from_documents(documents, store=store)
        assert store.list_documents() == []
        one = [d for d in documents if d.metadata["year"] == 2024]  # one file: no ambiguity
        index = DocMemoIndex.from_documents(one, store=store)
        assert [(s.doc_id, s.n_pages) for s in store.list_documents()] == [("report.pdf", 3)]
        (warning,) = [w for w in index.report.warnings if "without page images" in w]
        assert "report.pdf" in warning and "file_path" in warning


# -- 4. an index is its documents ----------------------------------------------------------------
def retrieved(index: DocMemoIndex, query: str, k: int = 20) -> list[tuple[str, int]]:
    return [
        (n.node.metadata["doc_id"], n.node.metadata["page"])
        for n in index.as_retriever(similarity_top_k=k).retrieve(query)
    ]


def test_from_documents_answers_from_its_documents_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCMEMO_STORE_DIR", str(tmp_path / "default-store"))
    write_pdf(tmp_path / "mgm" / "mgm.pdf", 6, "casino")
    write_pdf(tmp_path / "pepsi" / "8k.pdf", 3, "beverage")
    earlier = DocMemoIndex.from_documents(load(tmp_path / "mgm"))  # an earlier script
    earlier.store.close()
    index = DocMemoIndex.from_documents(load(tmp_path / "pepsi"))  # the same default store
    assert {doc for doc, _ in retrieved(index, "casino section page 2")} == {"8k.pdf"}
    index.insert(Document(text="Beverage volume grew 4 percent.", doc_id="note-1"))
    assert {doc for doc, _ in retrieved(index, "beverage volume")} == {"8k.pdf", "note-1"}
    index.delete_ref_doc("mgm.pdf")  # not this index's: nothing deleted
    everything = DocMemoIndex.from_store(index.store)  # the whole store, as before
    assert {doc for doc, _ in retrieved(everything, "casino section")} == {
        "mgm.pdf",
        "8k.pdf",
        "note-1",
    }
    index.store.close()


def test_a_subfolder_indexed_after_its_parent_keeps_its_ids(tmp_path: Path, capsys) -> None:
    root = tmp_path / "root"
    for name, pages in (("a/one.pdf", 2), ("b/two.pdf", 3), ("b/three.pdf", 2)):
        write_pdf(root / name, pages, Path(name).stem)
    store = tmp_path / "store"
    assert main(["index", str(root), "--store", str(store), "--quiet", "--ocr", "off"]) == 0
    capsys.readouterr()
    assert main(["index", str(root / "b"), "--store", str(store), "--quiet", "--ocr", "off"]) == 0
    assert "2 unchanged" in capsys.readouterr().out
    with open_store(path=store) as opened:
        index = DocMemoIndex.from_documents(load(root / "b"), store=opened)  # Python, after
        assert sorted(index.report.doc_ids.values()) == ["b/three.pdf", "b/two.pdf"]
        ids = sorted(s.doc_id for s in opened.list_documents())
        assert ids == ["a/one.pdf", "b/three.pdf", "b/two.pdf"]  # no file stored twice
        pages = retrieved(index, "two section page 1", k=10)
        assert len(pages) == len(set(pages)) and {doc for doc, _ in pages} <= {
            "b/two.pdf",
            "b/three.pdf",
        }


# -- 5. delete_ref_doc means one thing -----------------------------------------------------------
def test_delete_ref_doc_of_a_page_document_means_one_thing(tmp_path: Path, caplog) -> None:
    import logging

    write_pdf(tmp_path / "docs" / "long.pdf", 4, "delta")
    write_pdf(tmp_path / "other" / "long.pdf", 4, "epsilon")
    pages, others = load(tmp_path / "docs"), load(tmp_path / "other")
    with open_store(path=tmp_path / "store", encoder=default_encoder()) as store:
        built = DocMemoIndex.from_documents(pages, store=store)
        inserted = DocMemoIndex.from_documents([], store=store, root=tmp_path)
        inserted.insert(others[2])  # the whole file, from one of its page Documents
        for index, doc_id, page_document in (
            (built, "long.pdf", pages[2]),
            (inserted, "other/long.pdf", others[2]),
        ):
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                index.delete_ref_doc(page_document.doc_id)
            assert f"delete_ref_doc({doc_id!r})" in caplog.text  # nothing deleted, said how
            assert store.get_schema(doc_id) is not None
            index.delete_ref_doc(doc_id)
            assert store.get_schema(doc_id) is None


# -- 6. a query cut short says why and still gives round 1's pages ------------------------------
MODEL = "scripted-model"


@pytest.fixture(scope="module")
def filing(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("filing")
    write_pdf(root / "docs" / "8k.pdf", 8, "revenue")
    with open_store(path=root / "store", encoder=default_encoder()) as store:
        yield DocMemoIndex.from_documents(load(root / "docs"), store=store, ocr="off")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cut_short(index: DocMemoIndex, url: str, max_seconds: float, retries: int = 2):
    import time

    from llama_index_docmemo import DocMemoConfig, OpenAICompatible

    config = DocMemoConfig(
        rounds=2,
        pages_per_round=3,
        candidates=8,
        adaptive_granularity=False,
        max_seconds=max_seconds,
    )
    reader = OpenAICompatible(
        model=MODEL, api_base=url, api_key="x", multimodal=False, max_retries=retries
    )
    engine = index.as_query_engine(llm=reader, config=config)
    started = time.perf_counter()
    response = engine.query("What was the revenue in section 3?")
    return response, time.perf_counter() - started


def assert_said_why_and_kept_round_one(response, url: str) -> None:
    trace = response.metadata["docmemo"]
    assert trace["stop_reason"] == "llm_error"  # the LLM never answered
    assert MODEL in trace["error"] and url.rstrip("/") in trace["error"]
    assert "max_seconds" in trace["error"]
    assert response.source_nodes, "round 1's best candidates come back"
    assert all(n.node.metadata["unread"] is True for n in response.source_nodes)
    assert {n.node.metadata["doc_id"] for n in response.source_nodes} == {"8k.pdf"}
    scores = [n.score for n in response.source_nodes]
    assert scores == sorted(scores, reverse=True)
    assert trace["evidence"] == []  # nothing read is evidence


def test_a_dead_server_at_the_deadline_says_why(filing) -> None:
    """The client still retrying when the deadline comes (a server that refuses sooner, its
    retries spent, raises LLMError naming it, as before)."""
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    response, took = cut_short(filing, url, max_seconds=1.5, retries=50)
    assert took < 1.5 + 3.0
    assert_said_why_and_kept_round_one(response, url)


def test_a_slow_server_at_the_deadline_returns_round_ones_candidates(filing) -> None:
    from fake_vllm_server import FakeVLLM, Reply

    with FakeVLLM([], default=Reply("{}", delay=20.0), model=MODEL) as server:
        response, took = cut_short(filing, server.url, max_seconds=3.0)
    assert took < 3.0 + 3.0
    assert_said_why_and_kept_round_one(response, server.url)


def test_pages_without_their_file_are_read_as_text_and_the_trace_says_why(
    two_reports: Path, tmp_path: Path, caplog
) -> None:
    import logging

    from fake_vllm_server import FakeVLLM, Reply

    from llama_index_docmemo import DocMemoConfig, OpenAICompatible

    reading = {
        "notes": [],
        "useful_pages": [],
        "irrelevant_pages": [],
        "missing": [],
        "status": "need_more",
        "answer": None,
        "refined_query": None,
    }
    one = [d for d in load(two_reports, file_metadata=year_only) if d.metadata["year"] == 2024]
    config = DocMemoConfig(rounds=1, pages_per_round=2, candidates=4)
    with (
        open_store(path=tmp_path / "store", encoder=default_encoder()) as store,
        FakeVLLM([], default=Reply(json.dumps(reading)), model="qwen2.5-vl") as server,
    ):
        index = DocMemoIndex.from_documents(one, store=store)
        reader = OpenAICompatible(model="qwen2.5-vl", api_base=server.url, multimodal=True)
        with caplog.at_level(logging.WARNING):
            response = index.as_query_engine(llm=reader, config=config).query("beta section?")
    trace = response.metadata["docmemo"]
    assert trace["images"] is False and "report.pdf" in trace["images_reason"]
    assert "file_path" in trace["images_reason"]
    assert not [r for r in caplog.records if "no crops" in r.getMessage()]
