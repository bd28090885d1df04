"""A file whose name the store cannot hold fails alone, named and escaped; the rest is indexed.

A folder holds ``a.pdf``, ``new\\nline.pdf``, ``bad\\xff.pdf`` (not UTF-8) and ``z.pdf``, over a
store that already holds a document. Indexed through ``docmemo index`` and through
``DocMemoIndex.from_documents`` (Documents of ``SimpleDirectoryReader``), on real embedded stores:
the two bad files fail with their names escaped (no raw newline or undecodable byte reaches the
terminal or the log), ``a.pdf`` and ``z.pdf`` are searchable, the earlier document is still there.
A document the store itself rejects (an encoder's NaN) also fails alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import SimpleDirectoryReader
from safety_worker import HashEncoder, open_hash_store, write_pdf

from llama_index_docmemo import DocMemoIndex
from llama_index_docmemo.cli import main, options
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.store import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageEmbedding, PageInput

ENCODER = HashEncoder()
NEWLINE = "new\nline.pdf"
NOT_UTF8 = os.fsdecode(b"bad\xff.pdf")  # "bad\udcff.pdf", as os.listdir gives it
GOOD = ["a.pdf", "z.pdf"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in [*GOOD, NEWLINE, NOT_UTF8]:  # MuPDF cannot save to a name that is not UTF-8
        written = write_pdf(tmp_path / "staging.pdf", [f"Revenue of {name[:3]} was 42 million."])
        written.rename(docs / name)
    return docs


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    return write_pdf(tmp_path / "earlier" / "kept.pdf", ["Revenue kept from an earlier batch."])


def stored_ids(store: PageStore) -> set[str]:
    query = ENCODER.encode_query("revenue million")
    hits = store.search(query, limit=20, page_filter=PageFilter())
    listed = {schema.doc_id for schema in store.list_documents()}
    assert {hit.record.doc_id for hit in hits} == listed
    return listed


def assert_escaped(text: str) -> None:
    """Both bad names appear escaped, on lines of their own, and nothing raw reaches the text."""
    text.encode("utf-8")  # no undecodable byte (a surrogate) left in it
    assert NEWLINE not in text
    failed = [line for line in text.splitlines() if "new\\nline.pdf" in line or "bad\\xff" in line]
    assert len(failed) == 2, text
    assert any("is not valid UTF-8: '" in line and "bad\\xff.pdf'" in line for line in failed)
    assert any("contains control characters: 'new\\nline.pdf'" in line for line in failed)


def test_docmemo_index_fails_the_bad_names_alone(
    folder: Path, earlier: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(options, "encoder", lambda args: ENCODER)
    store = tmp_path / "store"
    common = ["--store", str(store), "--quiet", "--ocr", "off"]
    assert main(["index", str(earlier.parent), *common]) == 0
    capsys.readouterr()
    assert main(["index", str(folder), *common]) == 1  # some files failed
    captured = capsys.readouterr()
    assert_escaped(captured.out)
    assert captured.out.startswith("indexed 2 documents") and "2 failed" in captured.out
    assert "not attempted" not in captured.out and "error" not in captured.err
    with open_hash_store("edge", store) as opened:
        assert stored_ids(opened) == {"kept.pdf", *GOOD}


@pytest.mark.parametrize("backend", ["edge", "client"])
def test_from_documents_fails_the_bad_names_alone(
    folder: Path, earlier: Path, tmp_path: Path, backend: str, caplog
) -> None:
    documents = SimpleDirectoryReader(str(folder)).load_data()
    assert len({d.metadata["file_name"] for d in documents}) == 4
    with open_hash_store(backend, tmp_path / "store") as store:
        DocumentIndexer(store, ENCODER, ocr=False).index_paths([earlier])
        with caplog.at_level(logging.WARNING, logger="llama_index_docmemo.index"):
            index = DocMemoIndex.from_documents(documents, store=store, encoder=ENCODER, ocr=False)
        report = index.report
        assert report is not None
        assert sorted(report.doc_ids[source] for source in report.indexed) == GOOD
        assert {Path(source).name for source, _ in report.failed} == {NEWLINE, NOT_UTF8}
        assert_escaped(report.summary())
        warnings = [r.getMessage() for r in caplog.records if r.name == "llama_index_docmemo.index"]
        assert_escaped("\n".join(warnings))
        assert stored_ids(store) == {"kept.pdf", *GOOD}
        assert [n.metadata["file_name"] for n in index.as_retriever().retrieve("Revenue of z")]


class PoisonEncoder(HashEncoder):
    """NaN vectors for pages that say "poison": a document the store must reject."""

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        out = super().encode_pages(pages)
        for i, page in enumerate(pages):
            if "poison" in page.text.lower():
                out[i] = PageEmbedding(out[i].multivector * np.nan, out[i].pooled, out[i].sparse)
        return out


@pytest.mark.parametrize("backend", ["edge", "client"])
def test_a_document_the_store_rejects_fails_alone(tmp_path: Path, backend: str) -> None:
    docs = tmp_path / "docs"
    for name, text in [("a.pdf", "Revenue 1."), ("b.pdf", "Poison page."), ("z.pdf", "Revenue 3.")]:
        write_pdf(docs / name, [text])
    with open_hash_store(backend, tmp_path / "store") as store:
        report = DocumentIndexer(store, PoisonEncoder(), ocr=False).index_paths([docs])
        assert report.indexed == [str(docs / "a.pdf"), str(docs / "z.pdf")]
        [(source, reason)] = report.failed
        assert source == str(docs / "b.pdf") and "NaN" in reason and "'b.pdf'" in reason
        assert stored_ids(store) == {"a.pdf", "z.pdf"}
