"""Document identity: (tenant, path relative to the indexed root); the CLI's index, list and delete;
stores written by 0.1.0; and page images from any working directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_vllm_server import FakeVLLM, Reply
from safety_worker import DIM, HashEncoder, write_pdf

from llama_index_docmemo import cli
from llama_index_docmemo.cli import main
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.step_runtime import run as run_steps
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.store import operations as op
from llama_index_docmemo.store.layouts import MULTI, POOLED
from llama_index_docmemo.store.points import (
    ACCESS,
    DOC_KEY,
    FILE_NAME,
    KIND,
    KIND_DOCUMENT,
    LAYOUT_VERSION,
    REVISION,
    STORE_POINT_ID,
    TENANT_KEY,
    PointData,
    page_payload,
    revision,
)
from llama_index_docmemo.store.scope import PageFilter, everything
from llama_index_docmemo.types import FieldMatch, PageRecord, PageRef
from tests.legacy_layout import legacy_document_point_id


@pytest.fixture(scope="module")
def encoder():
    return default_encoder()


@pytest.fixture
def quick_cli(monkeypatch: pytest.MonkeyPatch, encoder) -> None:
    monkeypatch.setattr(
        cli.options, "encoder", lambda args: encoder
    )  # one model load for the module


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_keeps_two_tenants_same_named_files_and_scopes_list_and_delete(
    tmp_path: Path, capsys, quick_cli
) -> None:
    store = str(tmp_path / "store")
    for tenant, figure in (("acme", "12.5"), ("globex", "99.1")):
        folder = tmp_path / tenant
        write_pdf(folder / "report.pdf", [f"{tenant} revenue was {figure} million."])
        write_pdf(folder / "2022" / "10k.pdf", [f"{tenant} annual filing 2022."])
        write_pdf(folder / "2023" / "10k.pdf", [f"{tenant} annual filing 2023."])
        code, out, err = run(
            ["index", str(folder), "--store", store, "--tenant", tenant, "--quiet"], capsys
        )
        assert code == 0 and "indexed 3 documents" in out and "0 failed" in out, out + err

    for tenant, figure in (("acme", "12.5"), ("globex", "99.1")):
        code, out, _ = run(["list", "--store", store, "--tenant", tenant, "--json"], capsys)
        rows = json.loads(out)
        assert [r["doc_id"] for r in rows] == ["2022/10k.pdf", "2023/10k.pdf", "report.pdf"]
        assert {r["tenant"] for r in rows} == {tenant}
        assert all(r["source"].startswith(str(tmp_path / tenant)) for r in rows)
        code, out, _ = run(
            ["search", "revenue million", "--store", store, "--tenant", tenant, "--json"], capsys
        )
        assert json.loads(out)[0]["doc_id"] == "report.pdf"
        code, out, _ = run(
            ["ask", "What was the revenue?", "--store", store, "--tenant", tenant, "--json"], capsys
        )
        assert code == 0 and figure in out and ("99.1" if tenant == "acme" else "12.5") not in out

    code, out, _ = run(["list", "--store", store], capsys)  # no tenant: untenanted documents only
    assert out.strip() == "0 documents"
    code, out, err = run(["delete", "report.pdf", "--store", store], capsys)
    assert code == 1 and "no document 'report.pdf' (no tenant)" in err
    code, out, _ = run(
        ["delete", "report.pdf", "2022/10k.pdf", "--store", store, "--tenant", "acme"], capsys
    )
    assert code == 0 and out.splitlines() == ["deleted report.pdf", "deleted 2022/10k.pdf"]
    code, out, _ = run(["list", "--store", store, "--tenant", "acme", "--json"], capsys)
    assert [r["doc_id"] for r in json.loads(out)] == ["2023/10k.pdf"]
    code, out, _ = run(["list", "--store", store, "--tenant", "globex", "--json"], capsys)
    assert len(json.loads(out)) == 3, "the other tenant's same-named documents are untouched"


def test_cli_explicit_id_and_root(tmp_path: Path, capsys, quick_cli) -> None:
    store = str(tmp_path / "store")
    pdf = write_pdf(tmp_path / "in" / "deep" / "x.pdf", ["Contract 42 terms."])
    code, out, _ = run(
        ["index", str(pdf), "--id", "contracts/42", "--store", store, "--quiet"], capsys
    )
    assert code == 0
    code, out, _ = run(
        ["index", str(pdf), "--root", str(tmp_path), "--store", store, "--quiet"], capsys
    )
    assert code == 0
    code, out, _ = run(["list", "--store", store, "--json"], capsys)
    assert [r["doc_id"] for r in json.loads(out)] == ["contracts/42", "in/deep/x.pdf"]
    code, _, err = run(["index", str(pdf), str(pdf), "--id", "a", "--store", store], capsys)
    assert code == 2 and "--id names one document" in err


def test_page_images_reach_the_vlm_from_another_working_directory(
    tmp_path: Path, capsys, quick_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work" / "docs").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    write_pdf(tmp_path / "work" / "docs" / "scan.pdf", ["The plant opened on 14 March 2024."])
    monkeypatch.chdir(tmp_path / "work")
    assert run(["index", "docs", "--store", "store", "--quiet"], capsys)[0] == 0
    monkeypatch.chdir(tmp_path / "elsewhere")
    feedback = {
        "notes": [{"page": 1, "fact": "opened on 14 March 2024"}],
        "useful_pages": [1],
        "irrelevant_pages": [],
        "missing": [],
        "status": "answered",
        "answer": "14 March 2024",
        "refined_query": None,
    }
    with FakeVLLM([], default=Reply(json.dumps(feedback)), model="m") as server:
        code, out, err = run(
            [
                "ask",
                "When did the plant open?",
                "--store",
                "../work/store",
                "--json",
                "--llm-url",
                server.url,
                "--llm-model",
                "m",
            ],
            capsys,
        )
        assert code == 0, err
        assert server.requests and all(r.image_sizes for r in server.requests), "no page image"
    assert "could not be loaded" not in err


def legacy_store(path: Path) -> None:
    """A store as llama-index-docmemo 0.1.0 wrote it: layout 1, records keyed by doc id alone,
    no identity or access fields, and a page no record claims (left by a crash)."""
    encoder = HashEncoder()
    with EdgePageStore(path, encoder_name=encoder.name, dim=DIM, sparse=True) as store:
        points = []
        for doc_id, tenant, acl, texts in (
            ("report.pdf", "acme", ["finance"], ["Revenue 12.5 million.", "Costs 3 million."]),
            ("memo.pdf", None, [], ["Hiring twenty engineers."]),
            ("ghost.pdf", None, [], ["A page of a crashed write."]),
        ):
            schema = DocumentSchema(
                doc_id=doc_id,
                doc_version=f"{doc_id}-v1",
                n_pages=len(texts),
                tenant=tenant,
                acl=acl,
            )
            for page, text in enumerate(texts, start=1):
                record = PageRecord(
                    doc_id,
                    schema.doc_version,
                    page,
                    len(texts),
                    text,
                    f"/d/{doc_id}",
                    tenant=tenant,
                    acl=acl,
                )
                payload = {
                    k: v
                    for k, v in page_payload(
                        record, revision(record.doc_version, record.acl)
                    ).items()
                    if k
                    not in (
                        REVISION,
                        FILE_NAME,
                        TENANT_KEY,
                        ACCESS,
                        DOC_KEY,
                    )
                }
                emb = encoder.encode_query(text)
                points.append(
                    PointData(
                        legacy_document_point_id(f"{doc_id}#{page}"),
                        {MULTI: emb.multivector, POOLED: emb.pooled},
                        emb.sparse,
                        payload,
                    )
                )
            if doc_id != "ghost.pdf":
                legacy = {
                    "kind": "document",
                    "doc_id": doc_id,
                    "doc_version": schema.doc_version,
                    "tenant": tenant,
                    "acl": acl,
                    "schema": schema.model_dump_json(),
                }
                points.append(PointData(legacy_document_point_id(doc_id), payload=legacy))
        store._execute(op.Upsert(points))
        meta = PointData(STORE_POINT_ID, payload=store._meta.payload(layout_version=1))
        store._execute(op.Upsert([meta]))


def test_a_0_1_0_store_is_migrated_in_place(tmp_path: Path, caplog) -> None:
    path = tmp_path / "old-store"
    legacy_store(path)
    encoder = HashEncoder()
    with EdgePageStore(path, encoder_name=encoder.name, dim=DIM, sparse=True) as store:
        assert "migrated 2 documents from store layout 1" in caplog.text
        meta = store._execute(op.Retrieve(STORE_POINT_ID))
        assert meta["layout"] == LAYOUT_VERSION
        finance = PageFilter(tenant="acme", acl_groups=("finance",))
        assert [s.doc_id for s in store.list_documents(finance)] == ["report.pdf"]
        assert (
            store.list_documents(PageFilter(tenant="acme")) == []
        )  # its ACL holds after migration
        assert [s.doc_id for s in store.list_documents(PageFilter())] == ["memo.pdf"]
        assert store.document_version("report.pdf", tenant="acme") == "report.pdf-v1"
        assert store.count_pages() == 3, "the page no record claimed is gone"
        hits = store.search(encoder.encode_query("revenue million"), limit=5, page_filter=finance)
        assert hits[0].ref == PageRef("report.pdf", 1)
        unclaimed = everything(
            FieldMatch(KIND, "eq", KIND_DOCUMENT),
            FieldMatch(DOC_KEY, "is_empty"),
        )
        assert not run_steps(op.scroll_all(store._send, unclaimed))
        report = DocumentIndexer(store, encoder, ocr=False).index_paths(
            [write_pdf(tmp_path / "memo.pdf", ["Hiring thirty engineers."])]
        )
        assert report.ok and store.count_pages(PageFilter()) == 1  # replaced, not duplicated
    with EdgePageStore(path, encoder_name=encoder.name, dim=DIM, sparse=True) as store:
        assert store.count_pages() == 3


def test_identical_bytes_in_two_tenants_are_two_documents(tmp_path: Path) -> None:
    encoder = HashEncoder()
    pdf = write_pdf(tmp_path / "shared" / "report.pdf", ["Revenue 12.5 million.", "Costs."])
    with EdgePageStore(tmp_path / "s", encoder_name=encoder.name, dim=DIM, sparse=True) as store:
        indexer = DocumentIndexer(store, encoder, ocr=False)
        assert (
            indexer.index_paths([pdf], tenant="a").ok and indexer.index_paths([pdf], tenant="b").ok
        )
        assert store.count_pages() == 4, "each tenant has its own pages"
        assert store.delete_document("report.pdf", tenant="a")
        assert store.count_pages(PageFilter(tenant="b")) == 2
        hits = store.search(
            encoder.encode_query("revenue"), limit=5, page_filter=PageFilter(tenant="b")
        )
        assert {h.record.tenant for h in hits} == {"b"}
