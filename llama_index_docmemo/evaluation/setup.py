"""Wiring of an evaluation: the shared store and encoder, indexing the dataset once, engine construction."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.evaluation.baselines import EngineFactory
from llama_index_docmemo.evaluation.datasets import EvalDataset
from llama_index_docmemo.readers.base import Reader
from llama_index_docmemo.store.base import PageStore

if TYPE_CHECKING:
    from llama_index_docmemo.indexing import IndexReport
    from llama_index_docmemo.postprocessors import CropPostprocessor
    from llama_index_docmemo.query_engine import DocMemoQueryEngine


def open_eval_store(
    path: str | Path, encoder: PageEncoder | None = None
) -> tuple[PageStore, PageEncoder]:
    """The embedded page store at ``path`` with the default CPU encoder (or ``encoder``)."""
    from llama_index_docmemo.encoders import default_encoder
    from llama_index_docmemo.store.factory import open_store

    encoder = encoder or default_encoder()
    return open_store(path=Path(path), encoder=encoder), encoder


def ensure_indexed(
    store: PageStore, encoder: PageEncoder, dataset: EvalDataset, *, progress: bool = True
) -> IndexReport:
    """Index the dataset's PDFs into the store; documents already stored at this version are skipped.

    Returns the indexer's ``IndexReport`` (failed files are listed there, not raised: their
    questions then fail one by one and are reported by the runner).
    """
    from llama_index_docmemo.indexing import DocumentIndexer

    paths = [dataset.pdf_path(d) for d in dataset.doc_ids]
    return DocumentIndexer(store, encoder).index_paths(
        paths, root=dataset.pdf_dir, progress=progress
    )


def engine_factory(store: PageStore, encoder: PageEncoder, *, crops: bool) -> EngineFactory:
    """Builds DocMemo engines on the shared store and encoder.

    Crops (adaptive granularity) are produced only when ``crops`` is set: the offline and
    simulated readers do not look at crop images, so rendering them would only cost time.
    Evidence page images are never rendered during an evaluation.
    """
    crop_postprocessor: CropPostprocessor | None = None
    if crops:
        from llama_index_docmemo.postprocessors import CropPostprocessor

        crop_postprocessor = CropPostprocessor()

    def make(config: DocMemoConfig, reader: Reader) -> DocMemoQueryEngine:
        from llama_index_docmemo.query_engine import DocMemoQueryEngine

        return DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=encoder,
            reader=reader,
            config=config,
            crop_postprocessor=crop_postprocessor,
            evidence_images=False,
        )

    return make
