"""The Ray executor's pieces without a cluster: the worker classes, the CLI flags, lazy Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llama_index_docmemo.cli import main
from llama_index_docmemo.distributed.workers import EncodedDocument, EncodeWorker, prepare_task
from llama_index_docmemo.errors import DocMemoError, StoreError
from llama_index_docmemo.indexing.stages import DocumentJob, DocumentOutcome, PreparedDocument
from tests.ingest_samples import make_report
from tests.test_ingest_indexer import LengthEncoder


class FlakyStore:
    """Refuses the first ``refusals`` writes, then keeps what it is given."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.written: list[str] = []

    def upsert_document(self, schema, pages, embeddings) -> None:  # type: ignore[no-untyped-def]
        if self.refusals:
            self.refusals -= 1
            raise StoreError("upsert on the test store failed: 503 Service Unavailable")
        self.written.append(schema.doc_id)


def worker(store: FlakyStore | None = None, *, retry_seconds: float = 30.0) -> EncodeWorker:
    actor = EncodeWorker(
        LengthEncoder,
        "length",
        batch_size=2,
        image_long_side=200,
        store_options=None,
        write_retry_seconds=retry_seconds,
    )
    actor._store = store  # type: ignore[assignment]  (a server store, in a Ray worker)
    return actor


def prepared(tmp_path: Path) -> PreparedDocument:
    path = make_report(tmp_path / "r.pdf")
    outcome, body = prepare_task(DocumentJob(str(path), "r.pdf", None, (), path=path), None, None)
    assert outcome is None and isinstance(body, PreparedDocument)
    return body


def test_prepare_task_returns_the_outcome_when_the_job_ends_at_parsing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"not a pdf at all")
    outcome, body = prepare_task(DocumentJob(str(bad), "bad.pdf", None, (), path=bad), None, None)
    assert body is None and isinstance(outcome, DocumentOutcome)
    assert outcome.status == "failed" and "not a PDF" in outcome.reason


def test_the_encode_worker_encodes_for_the_single_writer(tmp_path: Path) -> None:
    result = worker().encode(prepared(tmp_path))
    assert isinstance(result, EncodedDocument) and len(result.embeddings) == 5
    assert result.seconds["encode"] > 0 and result.seconds["parse"] > 0


def test_a_refused_write_is_retried_until_the_store_takes_it(tmp_path: Path) -> None:
    store = FlakyStore(refusals=1)
    outcome = worker(store).encode_and_write(prepared(tmp_path))
    assert outcome.status == "indexed" and outcome.pages == 5 and store.written == ["r.pdf"]


def test_a_write_still_refused_after_the_retry_time_stops_the_batch(tmp_path: Path) -> None:
    store = FlakyStore(refusals=1000)
    outcome = worker(store, retry_seconds=0).encode_and_write(prepared(tmp_path))
    assert outcome.status == "failed" and outcome.store_failed
    assert "503 Service Unavailable" in outcome.reason and store.written == []


def test_a_worker_refuses_an_encoder_other_than_the_stores() -> None:
    with pytest.raises(DocMemoError, match="'length'.*'colqwen2.5:big'"):
        EncodeWorker(
            LengthEncoder,
            "colqwen2.5:big",
            batch_size=2,
            image_long_side=200,
            store_options=None,
            write_retry_seconds=1,
        )


def test_a_document_the_encoder_refuses_fails_alone(tmp_path: Path) -> None:
    class Refusing(LengthEncoder):
        def encode_pages(self, pages):  # type: ignore[no-untyped-def]
            raise DocMemoError(f"page {pages[0].ref}: no image tokens")

    actor = worker()
    actor.encoder = Refusing()
    outcome = actor.encode(prepared(tmp_path))
    assert isinstance(outcome, DocumentOutcome) and outcome.status == "failed"
    assert outcome.reason.startswith("cannot encode: page r.pdf")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--workers", "2"], "--workers and --gpus-per-worker need --ray"),
        (["--ray", "--id", "x"], "--id names one file"),
    ],
)
def test_index_ray_flags_are_checked_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], words: str
) -> None:
    pdf = make_report(tmp_path / "r.pdf")
    store = tmp_path / "store"
    assert main(["index", str(pdf), "--store", str(store), *flags]) == 2
    assert words in capsys.readouterr().err and not store.exists()


def test_index_with_ray_without_the_extra_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    pdf = make_report(tmp_path / "r.pdf")
    assert main(["index", str(pdf), "--store", str(tmp_path / "store"), "--ray"]) == 2
    err = capsys.readouterr().err
    assert "needs the 'ray' extra" in err and "llama-index-docmemo[ray]" in err


@pytest.mark.slow
def test_the_package_and_index_without_ray_never_import_ray(tmp_path: Path) -> None:
    pdf = make_report(tmp_path / "r.pdf")
    code = (
        "import sys\n"
        "import llama_index_docmemo\n"
        "from llama_index_docmemo.cli import main\n"
        f"assert main(['index', {str(pdf)!r}, '--store', {str(tmp_path / 'store')!r}, '--quiet']) == 0\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_vlm_summarizer_still_talks_to_its_server_after_pickling() -> None:
    """Ray ships the indexer's summarizer to its parse tasks by pickling it."""
    import pickle
    import socket

    from llama_index_docmemo.errors import LLMError
    from llama_index_docmemo.ingest.summaries import VLMPageSummarizer
    from llama_index_docmemo.llms import QwenVL
    from llama_index_docmemo.memory.schema import DocumentSchema
    from llama_index_docmemo.types import PageRecord

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    summarizer = VLMPageSummarizer(QwenVL(api_base=url, model="m", max_retries=0))
    shipped = pickle.loads(pickle.dumps(summarizer))
    page = PageRecord(doc_id="a", doc_version="v", page=1, n_pages=1, text="Revenue", source="")
    with pytest.raises(LLMError, match=f"127.0.0.1:{port}.*could not connect"):
        shipped(DocumentSchema(doc_id="a", doc_version="v", n_pages=1), [page])
