"""Stored vectors computed beside the encoder (``validation.lay_out``), written as they are.

A page-image store pools tokens and encodes MUVERA for every page it writes (~35 ms of CPU a
page); an embedded store has one writer. Laying pages out where they are encoded (each Ray
worker) must write exactly what the store would have computed, and nothing a store of another
layout, or a damaged copy, could mistake for its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_store_backends import BACKENDS, DIM, corpus, make_query, open_store_on

from llama_index_docmemo import DocumentIndexer
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import DocumentRejectedError
from llama_index_docmemo.store import EdgePageStore, MultivectorLayout
from llama_index_docmemo.store.layouts import MULTI
from llama_index_docmemo.store.points import lay_out
from llama_index_docmemo.types import PageEmbedding, PageInput, StoredVectors
from tests.ingest_samples import make_report

POOLED_MUVERA = MultivectorLayout(first_stage="muvera", storage="turbo8", token_pool_factor=3)


def grid_pages(embeddings: list[PageEmbedding]) -> list[PageEmbedding]:
    """The corpus's pages as 4 x 3 patch grids (12 vectors), so pooling merges something."""
    rng = np.random.default_rng(7)
    pages = []
    for e in embeddings:
        rows = rng.normal(size=(12, DIM)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        pages.append(replace(e, multivector=rows, grid=(4, 3)))
    return pages


def forbid_layout_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> dict[str, np.ndarray]:
        raise AssertionError("the writer computed a page's vectors it was given")

    monkeypatch.setattr(MultivectorLayout, "page_vectors", refuse)


def searches(store: object) -> list[list[tuple[object, float]]]:
    return [
        [(h.ref, round(h.score, 5)) for h in store.search(make_query(q, sparse=False), limit=5)]  # type: ignore[attr-defined]
        for q in range(4)
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_laid_out_pages_are_written_as_given_and_search_as_computed_ones(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = [(s, r, grid_pages(e)) for s, r, e in corpus()]
    computed = open_store_on(backend, tmp_path / "computed", layout=POOLED_MUVERA, sparse=False)
    for document in documents:
        computed.upsert_document(*document)
    laid_out = [(s, r, [lay_out(e, POOLED_MUVERA, DIM) for e in es]) for s, r, es in documents]
    assert laid_out[0][2][0].stored is not None
    assert laid_out[0][2][0].stored.vectors[MULTI].shape == (4, DIM)  # 12 vectors pooled by 3
    given = open_store_on(backend, tmp_path / "given", layout=POOLED_MUVERA, sparse=False)
    with monkeypatch.context() as patched:
        forbid_layout_work(patched)
        for document in laid_out:
            given.upsert_document(*document)
    assert searches(given) == searches(computed)
    computed.close()
    given.close()


def test_pages_laid_out_for_another_layout_are_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema, records, embeddings = corpus()[0]
    pages = grid_pages(embeddings)
    other = MultivectorLayout(first_stage="muvera", storage="turbo8", token_pool_factor=2)
    calls: list[int] = []
    real = MultivectorLayout.page_vectors

    def counted(self: MultivectorLayout, *args: object) -> dict[str, np.ndarray]:
        calls.append(1)
        return real(self, *args)  # type: ignore[arg-type]

    laid_out = [lay_out(e, other, DIM) for e in pages]
    monkeypatch.setattr(MultivectorLayout, "page_vectors", counted)
    with open_store_on("edge", tmp_path / "s", layout=POOLED_MUVERA, sparse=False) as store:
        store.upsert_document(schema, records, laid_out)
        points = store.search(make_query(0, sparse=False), limit=6)
    assert len(calls) == len(pages)  # every page computed in the store's own layout
    assert len(points) == 6


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda v: {**v, MULTI: v[MULTI][:, :-1]}, "page 1: laid-out multi: shape"),
        (lambda v: {MULTI: v[MULTI]}, "page 1: laid-out vectors \\['multi'\\]"),
        (
            lambda v: {**v, MULTI: np.full_like(v[MULTI], np.nan)},
            "page 1: laid-out multi: contains NaN",
        ),
    ],
)
def test_damaged_laid_out_vectors_reject_the_document_naming_the_page(
    tmp_path: Path,
    damage: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    message: str,
) -> None:
    schema, records, embeddings = corpus()[0]
    pages = [lay_out(e, POOLED_MUVERA, DIM) for e in grid_pages(embeddings)]
    stored = pages[0].stored
    assert stored is not None
    pages[0] = replace(pages[0], stored=StoredVectors(stored.layout, damage(stored.vectors)))
    with open_store_on("edge", tmp_path / "s", layout=POOLED_MUVERA, sparse=False) as store:
        with pytest.raises(DocumentRejectedError, match=message):
            store.upsert_document(schema, records, pages)
        assert store.count_pages() == 0  # nothing of the document written


def test_an_embedding_the_store_would_reject_is_left_for_the_write_to_name() -> None:
    _, _, embeddings = corpus()[0]
    bad = replace(embeddings[0], multivector=np.full((3, DIM), np.nan, np.float32))
    assert lay_out(bad, POOLED_MUVERA, DIM) is bad


class GridEncoder(PageEncoder):
    """Text-modality stand-in with image-encoder-shaped output: 12 vectors on a 4 x 3 grid."""

    name = "grid-encoder"
    dim = DIM
    modality = "text"

    def _embed(self, seed: int) -> PageEmbedding:
        rows = np.random.default_rng(seed).normal(size=(12, DIM)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        pooled = rows.mean(axis=0)
        return PageEmbedding(rows, pooled / np.linalg.norm(pooled), grid=(4, 3))

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        return [self._embed(p.ref.page) for p in pages]

    def encode_queries(self, queries: Sequence[str]) -> list[PageEmbedding]:
        return [self._embed(1000 + i) for i, _ in enumerate(queries)]


def test_indexing_lays_pages_out_in_the_encode_stage_not_in_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llama_index_docmemo.indexing import executors

    writes: list[int] = []
    real_write = executors.write_document

    def write_without_layout_work(*args: object, **kwargs: object) -> object:
        with monkeypatch.context() as patched:
            forbid_layout_work(patched)
            writes.append(1)
            return real_write(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(executors, "write_document", write_without_layout_work)
    store = EdgePageStore(
        tmp_path / "s", encoder_name=GridEncoder.name, dim=DIM, layout=POOLED_MUVERA
    )
    with store:
        indexer = DocumentIndexer(store, GridEncoder(), ocr=False)
        report = indexer.index_paths([make_report(tmp_path / "report.pdf")])
        assert report.ok and writes == [1]
        assert report.stage_seconds["vectors"] > 0
        assert store.count_pages() == report.pages == 5
