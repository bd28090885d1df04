"""DocumentIndexer against in-test store and encoder doubles: skip, replace, batch failures, summaries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import Document

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.indexing import DocumentIndexer, IndexReport
from llama_index_docmemo.ingest.files import expand_paths
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store.base import PageStore
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import (
    PageEmbedding,
    PageHit,
    PageInput,
    PageRecord,
    PageRef,
    QueryEmbedding,
)
from tests.ingest_samples import make_bad_files, make_report, make_scanned_slides


class LengthEncoder(PageEncoder):
    """Embeds a page as its text length: enough to check what reached the encoder."""

    name = "length"
    dim = 2

    def __init__(self) -> None:
        self.batches: list[list[PageInput]] = []

    def _embed(self, text: str) -> PageEmbedding:
        vec = np.array([len(text), 1.0], dtype=np.float32)
        return PageEmbedding(multivector=vec[None, :], pooled=vec)

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        self.batches.append(list(pages))
        return [self._embed(p.text) for p in pages]

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        return [self._embed(q) for q in queries]


class ImageLengthEncoder(LengthEncoder):
    """The same, declared an image encoder: the indexer renders its pages."""

    modality = "image"


class DictStore(PageStore):
    """Keeps schemas and records in dicts; counts upserts."""

    encoder_name = "length"
    dim = 2

    def __init__(self) -> None:
        self.schemas: dict[str, DocumentSchema] = {}
        self.records: dict[str, list[PageRecord]] = {}
        self.upserts: list[str] = []

    def upsert_document(self, schema, pages, embeddings) -> None:  # type: ignore[override]
        assert len(pages) == len(embeddings)
        self.schemas[schema.doc_id] = schema
        self.records[schema.doc_id] = list(pages)
        self.upserts.append(schema.doc_id)

    def document_version(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        schema = self.get_schema(doc_id, tenant=tenant)
        return schema.doc_version if schema else None

    def get_schema(self, doc_id: str, *, tenant: str | None = None) -> DocumentSchema | None:
        schema = self.schemas.get(doc_id)
        return schema if schema is not None and schema.tenant == tenant else None

    def list_documents(self, page_filter: PageFilter | None = None) -> list[DocumentSchema]:
        return list(self.schemas.values())

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> bool:
        self.records.pop(doc_id, None)
        return self.schemas.pop(doc_id, None) is not None

    def search(self, query, *, limit, page_filter=None, prefetch_limit=None) -> list[PageHit]:  # type: ignore[override]
        return []

    def get_pages(self, refs: Sequence[PageRef], page_filter=None) -> list[PageRecord]:  # type: ignore[override]
        return [r for ref in refs for r in self.records.get(ref.doc_id, []) if r.page == ref.page]

    def count_pages(self, page_filter: PageFilter | None = None) -> int:
        return sum(len(r) for r in self.records.values())

    def close(self) -> None:
        pass


class FixedOcr:
    name = "fixed"

    def read(self, page: object) -> str:
        return "Scanned slide words about market share"


@pytest.fixture
def parts() -> tuple[DictStore, LengthEncoder]:
    return DictStore(), LengthEncoder()


def test_index_paths_writes_records_schema_and_embeddings(tmp_path: Path) -> None:
    store, encoder = DictStore(), ImageLengthEncoder()
    path = make_report(tmp_path / "report.pdf")
    indexer = DocumentIndexer(store, encoder, ocr=False, batch_size=2)
    report = indexer.index_paths([path], tenant="acme", acl=["finance"])
    assert report.indexed == [str(path)] and report.pages == 5 and report.ok
    assert [len(b) for b in encoder.batches] == [2, 2, 1]
    assert [[p.ref.page for p in b] for b in encoder.batches] == [[1, 2], [3, 4], [5]]
    assert report.stage_seconds["render"] > 0 and report.stage_seconds["parse"] > 0
    records = store.records["report.pdf"]
    assert [r.page for r in records] == [1, 2, 3, 4, 5]
    assert records[2].section == "1 Introduction > 1.1 Background"
    assert records[0].tenant == "acme" and records[0].acl == ["finance"]
    assert records[0].n_pages == 5 and records[0].width == 595
    assert store.schemas["report.pdf"].tenant == "acme"
    images = [page.load_image() for batch in encoder.batches for page in batch]
    assert [max(image.size) for image in images] == [1500] * 5
    assert images[0].tobytes() != images[1].tobytes(), "each page gets its own image"


def test_a_text_encoder_gets_no_page_images(tmp_path: Path, parts) -> None:
    store, encoder = parts
    report = DocumentIndexer(store, encoder, ocr=False).index_paths(
        [make_report(tmp_path / "r.pdf")]
    )
    assert all(page.load_image is None for batch in encoder.batches for page in batch)
    assert report.stage_seconds["render"] == 0 and report.stage_seconds["encode"] > 0


def test_unchanged_file_is_skipped_and_changed_file_replaced(tmp_path: Path, parts) -> None:
    store, encoder = parts
    path = make_report(tmp_path / "report.pdf")
    indexer = DocumentIndexer(store, encoder, ocr=False)
    indexer.index_paths([path])
    again = indexer.index_paths([path])
    assert again.unchanged == [str(path)] and again.indexed == [] and again.pages == 0
    assert store.upserts == ["report.pdf"]
    make_report(path, extra="A new closing remark on page five")
    changed = indexer.index_paths([path])
    assert changed.indexed == [str(path)]
    assert "closing remark" in store.records["report.pdf"][4].text
    regrouped = indexer.index_paths([path], acl=["finance"])
    assert regrouped.indexed == [str(path)], "a new ACL re-indexes an unchanged file"
    other = indexer.index_paths([path], tenant="other")
    assert other.indexed == [str(path)], "another tenant's document of the same name"


def test_bad_files_are_listed_and_good_ones_indexed(tmp_path: Path, parts) -> None:
    store, encoder = parts
    good = make_report(tmp_path / "docs" / "good.pdf")
    bad = make_bad_files(tmp_path / "docs" / "bad", good)
    report = DocumentIndexer(store, encoder, ocr=False).index_paths(
        [tmp_path / "docs", tmp_path / "absent.pdf", bad["not a PDF"]]
    )
    assert report.indexed == [str(good)]
    reasons = dict(report.failed)
    assert len(reasons) == 7
    for kind, path in bad.items():
        assert kind in reasons[str(path)]
    assert reasons[str(tmp_path / "absent.pdf")] == "no such file or folder"
    assert "7 failed" in report.summary()


def test_same_file_name_in_two_folders_gives_two_documents(tmp_path: Path, parts) -> None:
    store, encoder = parts
    first = make_report(tmp_path / "a" / "r.pdf")
    second = make_report(tmp_path / "b" / "r.pdf", extra="other")
    report = DocumentIndexer(store, encoder, ocr=False).index_paths([first, second, first])
    assert report.indexed == [str(first), str(second)] and report.ok
    assert report.doc_ids == {str(first): "a/r.pdf", str(second): "b/r.pdf"}
    assert store.records["a/r.pdf"][0].source == str(first.resolve())


def test_one_doc_id_twice_in_a_batch_fails_the_second(tmp_path: Path, parts) -> None:
    store, encoder = parts
    in_folder = make_report(tmp_path / "a" / "r.pdf")
    loose = make_report(tmp_path / "b" / "r.pdf", extra="other")
    report = DocumentIndexer(store, encoder, ocr=False).index_paths([tmp_path / "a", loose])
    assert report.indexed == [str(in_folder)]
    assert report.failed[0][0] == str(loose) and "already taken" in report.failed[0][1]


def test_root_and_explicit_ids(tmp_path: Path, parts) -> None:
    store, encoder = parts
    nested = make_report(tmp_path / "pdfs" / "2023" / "10k.pdf")
    outside = make_report(tmp_path / "elsewhere.pdf")
    indexer = DocumentIndexer(store, encoder, ocr=False)
    report = indexer.index_paths([nested, outside], root=tmp_path / "pdfs")
    assert report.doc_ids == {str(nested): "2023/10k.pdf"}
    assert report.failed == [(str(outside), f"outside the indexed root {tmp_path / 'pdfs'}")]
    explicit = indexer.index_file(outside, doc_id="contracts/42")
    assert explicit.indexed == [str(outside)] and "contracts/42" in store.schemas
    with pytest.raises(ValueError, match="doc_id"):
        indexer.index_file(outside, doc_id="bad\nid")
    with pytest.raises(ValueError, match="tenant"):
        indexer.index_paths([outside], tenant="")


def test_unread_pages_are_reported_with_a_warning(tmp_path: Path, parts) -> None:
    store, encoder = parts
    deck = make_scanned_slides(tmp_path / "deck.pdf", ["Plan", "Goals"])
    report = DocumentIndexer(store, encoder, ocr=False).index_paths([deck])
    assert report.unread_pages == {"deck.pdf": [1, 2]} and report.indexed
    assert "OCR is off" in report.warnings[0]
    ocred = DocumentIndexer(DictStore(), encoder, ocr=FixedOcr()).index_paths([deck])
    assert ocred.ocr_pages == 2 and not ocred.warnings


def test_summarizer_replaces_first_lines_where_it_answers(tmp_path: Path, parts) -> None:
    store, encoder = parts

    def vlm_summaries(schema: DocumentSchema, pages: Sequence[PageRecord]) -> dict[int, str]:
        assert len(pages) == schema.n_pages
        return {2: "Why widgets matter", 3: ""}

    DocumentIndexer(store, encoder, ocr=False, summarizer=vlm_summaries).index_paths(
        [make_report(tmp_path / "r.pdf")]
    )
    schema = store.schemas["r.pdf"]
    assert schema.summary_of(2) == "Why widgets matter"
    assert schema.summary_of(3).startswith("1.1 Background")
    assert schema.summaries_by == "vlm_summaries"


def test_index_documents_and_skip_on_second_run(tmp_path: Path, parts) -> None:
    store, encoder = parts
    docs = [
        Document(text="Alpha page", metadata={"file_name": "memo.pdf", "source": "1"}),
        Document(text="Beta page", metadata={"file_name": "memo.pdf", "source": "2"}),
        Document(text="orphan", id_="x"),
    ]
    indexer = DocumentIndexer(store, encoder, ocr=False)
    report = indexer.index_documents(docs)
    assert report.indexed == ["memo.pdf", "x"] and report.pages == 3  # x: under its own id
    assert report.failed == []
    assert encoder.batches[0][0].load_image is None, "no file: nothing to render"
    assert indexer.index_documents(docs).unchanged == ["memo.pdf", "x"]


def test_expand_paths_recurses_folders_for_pdfs_only(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("b.pdf", "a.PDF", "sub/c.pdf", "notes.txt"):
        (tmp_path / name).write_bytes(b"%PDF-")
    files, failed, skipped = expand_paths([tmp_path, tmp_path / "b.pdf", tmp_path / "nope"])
    assert [f.doc_id for f in files] == ["a.PDF", "b.pdf", "sub/c.pdf"]
    assert [f.path.relative_to(tmp_path).as_posix() for f in files] == [
        "a.PDF",
        "b.pdf",
        "sub/c.pdf",
    ]
    assert failed == [(str(tmp_path / "nope"), "no such file or folder")] and skipped == []


def test_report_summary_lists_failures() -> None:
    report = IndexReport(indexed=["a.pdf"], failed=[("b.pdf", "encrypted")], pages=3, seconds=1.5)
    text = report.summary()
    assert text.splitlines()[0].startswith("indexed 1 documents (3 pages, 0 by OCR)")
    assert "FAILED b.pdf: encrypted" in text and not report.ok


def test_report_summary_escapes_names_one_line_each() -> None:
    failed = [("new\nline.pdf", "x"), ("bad\udcff.pdf", "y"), ("été.pdf", "z\tw")]
    lines = IndexReport(failed=failed).summary().splitlines()
    assert lines[1:] == [
        "FAILED new\\nline.pdf: x",
        "FAILED bad\\xff.pdf: y",
        "FAILED été.pdf: z\\tw",
    ]


def test_bad_batch_size(parts) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        DocumentIndexer(*parts, ocr=False, batch_size=0)


def test_index_documents_ids_are_paths_relative_to_their_common_folder(
    tmp_path: Path, parts
) -> None:
    store, encoder = parts
    first = make_report(tmp_path / "a" / "r.pdf")
    second = make_report(tmp_path / "b" / "r.pdf", extra="other")
    docs = [
        Document(text=f"page {n}", metadata={"file_path": str(path), "source": str(n)})
        for path in (first, second)
        for n in (1, 2)
    ]
    report = DocumentIndexer(store, encoder, ocr=False).index_documents(docs)
    assert report.ok and report.doc_ids == {str(first): "a/r.pdf", str(second): "b/r.pdf"}
    assert store.schemas["b/r.pdf"].source == str(second.resolve())


def test_only_an_installed_hook_runs_at_fault_points(tmp_path: Path, parts, monkeypatch) -> None:
    from llama_index_docmemo.faults import set_fault_hook

    store, encoder = parts
    path = make_report(tmp_path / "r.pdf")
    monkeypatch.setenv("DOCMEMO_FAULT", "document-indexed:enospc")  # 0.1.0's switch: ignored
    assert DocumentIndexer(store, encoder, ocr=False).index_paths([path]).ok
    reached: list[str] = []
    assert set_fault_hook(reached.append) is None
    try:
        make_report(path, extra="a second version")
        assert DocumentIndexer(store, encoder, ocr=False).index_paths([path]).ok
    finally:
        assert set_fault_hook(None) == reached.append
    assert reached == ["batch-encoded", "document-indexed"]


def test_a_page_the_encoder_cannot_read_fails_that_document_only(tmp_path: Path) -> None:
    from llama_index_docmemo.errors import DocMemoError

    class RefusingEncoder(LengthEncoder):
        def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
            if pages[0].ref.doc_id == "b.pdf":
                raise DocMemoError(f"page {pages[0].ref}: 3 image tokens, expected 4")
            return super().encode_pages(pages)

    store = DictStore()
    docs = [make_report(tmp_path / name) for name in ("a.pdf", "b.pdf", "c.pdf")]
    report = DocumentIndexer(store, RefusingEncoder(), ocr=False).index_paths([tmp_path])
    assert report.indexed == [str(docs[0]), str(docs[2])] and store.upserts == ["a.pdf", "c.pdf"]
    assert report.failed == [
        (str(docs[1]), "cannot encode: page b.pdf#p1: 3 image tokens, expected 4")
    ]


def test_summaries_are_written_once_per_document_version(tmp_path: Path, parts) -> None:
    """Summaries live in the stored schema: an unchanged file costs no summary call, a new
    version one (the questions afterwards read them from the store)."""
    store, encoder = parts
    calls: list[str] = []

    def vlm_summaries(schema: DocumentSchema, pages: Sequence[PageRecord]) -> dict[int, str]:
        calls.append(schema.doc_version)
        return {2: "Why widgets matter"}

    indexer = DocumentIndexer(store, encoder, ocr=False, summarizer=vlm_summaries)
    path = make_report(tmp_path / "r.pdf")
    indexer.index_paths([path])
    indexer.index_paths([path])
    assert len(calls) == 1
    make_report(path, extra="A new closing remark on page five")
    indexer.index_paths([path])
    assert len(calls) == 2 and calls[0] != calls[1]
    assert store.schemas["r.pdf"].summary_of(2) == "Why widgets matter"
