"""Page-store scale with ColQwen-shaped pages: each multivector layout at 10k / 100k pages.

For every layout (``--layouts``) a fresh Qdrant Edge store is filled through the package's own
write path inside ``bulk_load()`` (HNSW built once at the end), then searched through
``PageStore.search``. Per layout: build time (fill + index), upsert pages/s, p50 / p95 search
latency, recall@10 against exact MaxSim over the same original vectors (numpy, float32),
bytes per page on disk (the whole shard folder, WAL included) and the process's resident
memory while searching (VmRSS; its anonymous and file-backed parts are reported apart).

Bytes are accounted twice: by part of the store (each named vector's storage, its quantized
copy, the HNSW graph, payload, payload indexes, the write-ahead log) and as a fixed cost a store
plus a cost a page, fitted from this build and one of the first document alone (the engine
preallocates 32 MiB chunks and log segments, so a small store's bytes a page say little about
a large one's).

The synthetic pages behave like ColQwen2.5's (``Corpus``):

- a page is a 32 x 24 patch grid (768 vectors of 128 dims, ``--vectors`` changes it), row-major
  as the ColQwen encoder stores it;
- 512 topics of 64 "words" (words of a topic are noisy copies of its direction); a document
  (100 pages) has 6 topics, each page draws 24 words from 2 of them, so neighbouring pages and
  documents share vocabulary (topic clusters);
- content: 30-65% of a page, a band of text lines (rows) laid out word by word along each row,
  each patch a noisy copy (noise 0.5 / sqrt(128) per dimension) of its word;
- background: every other patch is a near-duplicate (noise 0.15) of one of 16 vectors shared by
  all pages (white space, margins, rules), as real pages' empty patches are;
- a query is 15-30 vectors, each a noisy copy (noise 0.6) of a word of one target page's
  content; its exact MaxSim top-10 is what every layout must find.

    python benchmarks/store_scale.py --pages 10000 --vectors 768 --json reports/scale_10k.json
    python benchmarks/store_scale.py --pages 100000 --vectors 768 --layouts rows_cols
    python benchmarks/store_scale.py --pages 500 --colqwen-tiny   # the tiny ColQwen, whole path

``--json`` writes exactly the rows ``[{"layout", "pages", "vectors", "p50_ms", "p95_ms",
"recall_at_10", "disk_bytes_per_page", "rss_bytes", "default"}]`` ("default": the layout
``open_store`` gives a page-image encoder's new store, ``PAGE_IMAGE_LAYOUT``); ``--out`` also
gets a Markdown table with the build columns.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, MultivectorLayout
from llama_index_docmemo.store.layouts import PAGE_IMAGE_LAYOUT, pool_tokens
from llama_index_docmemo.store.muvera import Muvera
from llama_index_docmemo.store.operations import prefetch_for
from llama_index_docmemo.store.points import lay_out
from llama_index_docmemo.types import PageEmbedding, PageRecord

TOP_K = 10
PAGES_PER_DOC = 100
N_TOPICS, WORDS_PER_TOPIC, WORD_SPREAD = 512, 64, 1.0
TOPICS_PER_DOC, TOPICS_PER_PAGE, WORDS_PER_PAGE = 6, 2, 24
N_BACKGROUND = 16
CONTENT_SHARE = (0.30, 0.65)
TOKEN_NOISE, BACKGROUND_NOISE, QUERY_NOISE = 0.5, 0.15, 0.6
QUERY_VECTORS = (15, 30)
WORDS_PER_LINE = (3, 6)

LAYOUTS: dict[str, MultivectorLayout] = {
    "mean": MultivectorLayout(first_stage="mean"),
    "mean-f16": MultivectorLayout(first_stage="mean", storage="float16"),
    "rows_cols": MultivectorLayout(first_stage="rows_cols", storage="float16"),
    "rows_cols-sq": MultivectorLayout(
        first_stage="rows_cols", storage="float16", quantization="scalar"
    ),
    "rows_cols-bq": MultivectorLayout(
        first_stage="rows_cols", storage="float16", quantization="binary", oversampling=2.0
    ),
    "mean-bq": MultivectorLayout(
        first_stage="mean", storage="float16", quantization="binary", oversampling=2.0
    ),
    "mean-bq-disk": MultivectorLayout(
        first_stage="mean", storage="float16", quantization="binary", oversampling=2.0, on_disk=True
    ),
    "rows_cols-disk": MultivectorLayout(first_stage="rows_cols", storage="float16", on_disk=True),
    "rows_cols-pool3": MultivectorLayout(
        first_stage="rows_cols", storage="float16", token_pool_factor=3
    ),
    "mean-tq4": MultivectorLayout(first_stage="mean", storage="float16", quantization="turbo4"),
    "mean-tq2": MultivectorLayout(
        first_stage="mean", storage="float16", quantization="turbo2", oversampling=4.0
    ),
    "mean-bq8": MultivectorLayout(
        first_stage="mean", storage="float16", quantization="binary", query_encoding="scalar8"
    ),
    "muvera-bq": MultivectorLayout(first_stage="muvera", storage="float16", quantization="binary"),
    "muvera-tq4": MultivectorLayout(first_stage="muvera", storage="float16", quantization="turbo4"),
    "muvera-t8": MultivectorLayout(first_stage="muvera", storage="turbo8"),
    "muvera-t8-tq4": MultivectorLayout(
        first_stage="muvera", storage="turbo8", quantization="turbo4"
    ),
    "muvera-t8-pool2": MultivectorLayout(
        first_stage="muvera", storage="turbo8", token_pool_factor=2
    ),
    "muvera-t8-pool3": MultivectorLayout(
        first_stage="muvera", storage="turbo8", token_pool_factor=3
    ),
    "muvera-t8-pool4": MultivectorLayout(
        first_stage="muvera", storage="turbo8", token_pool_factor=4
    ),
    "muvera-t4": MultivectorLayout(first_stage="muvera", storage="turbo4"),
    "muvera-t4-pool2": MultivectorLayout(
        first_stage="muvera", storage="turbo4", token_pool_factor=2
    ),
    "muvera2k-t8-pool2": MultivectorLayout(
        first_stage="muvera", storage="turbo8", token_pool_factor=2, muvera=Muvera(reps=8)
    ),
    "muvera-t8-bq-pool3": MultivectorLayout(
        first_stage="muvera", storage="turbo8", quantization="binary", token_pool_factor=3
    ),
}
DEFAULT = "default"
"""``--layouts default``: the layout ``open_store`` gives a page-image encoder's new store."""
ENCODER_NAME = "synthetic-colqwen"


def layout_of(name: str) -> MultivectorLayout:
    return PAGE_IMAGE_LAYOUT if name == DEFAULT else LAYOUTS[name]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def grid_of(vectors: int) -> tuple[int, int]:
    """(rows, columns) of a portrait page grid holding ``vectors`` patches (768 -> 32 x 24)."""
    columns = max(1, round(math.sqrt(vectors * 0.75)))
    while vectors % columns:
        columns -= 1
    return vectors // columns, columns


class Corpus:
    """Deterministic synthetic pages: any document regenerates from (seed, doc index)."""

    def __init__(self, n_pages: int, vectors: int, seed: int = 0, dim: int = 128) -> None:
        self.n_pages, self.vectors, self.seed, self.dim = n_pages, vectors, seed, dim
        self.grid = grid_of(vectors)
        rng = np.random.default_rng([seed, 0])
        topics = _unit(rng.normal(size=(N_TOPICS, 1, dim)))
        spread = rng.normal(size=(N_TOPICS, WORDS_PER_TOPIC, dim)) / np.sqrt(dim)
        self.words = _unit(topics + WORD_SPREAD * spread).reshape(-1, dim)
        self.background = _unit(rng.normal(size=(N_BACKGROUND, dim)))

    @property
    def n_docs(self) -> int:
        return -(-self.n_pages // PAGES_PER_DOC)

    def doc_pages(self, doc: int) -> int:
        return min(PAGES_PER_DOC, self.n_pages - doc * PAGES_PER_DOC)

    def _page(
        self, rng: np.random.Generator, doc_topics: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One page's (vectors, dim) patches and the word of each patch (-1: background)."""
        rows, columns = self.grid
        topics = rng.choice(doc_topics, size=TOPICS_PER_PAGE, replace=False)
        pool = (topics[:, None] * WORDS_PER_TOPIC + np.arange(WORDS_PER_TOPIC)).ravel()
        vocabulary = rng.choice(pool, size=WORDS_PER_PAGE, replace=False)
        share = rng.uniform(*CONTENT_SHARE)
        lines = max(1, round(rows * share / 0.85))
        top = int(rng.integers(0, rows - lines + 1))
        left, right = 1, columns - 1 if columns > 2 else columns
        words = np.full((rows, columns), -1, dtype=np.int64)
        for row in range(top, top + lines):
            cuts = (
                np.sort(
                    rng.choice(
                        np.arange(left + 1, right),
                        size=int(rng.integers(*WORDS_PER_LINE)) - 1,
                        replace=False,
                    )
                )
                if right - left > 6
                else np.array([], dtype=np.int64)
            )
            for start, end in zip([left, *cuts], [*cuts, right], strict=True):
                words[row, start:end] = vocabulary[int(rng.integers(0, WORDS_PER_PAGE))]
        flat = words.ravel()
        content = flat >= 0
        patches = np.empty((flat.size, self.dim), dtype=np.float32)
        noise = rng.normal(size=(flat.size, self.dim)).astype(np.float32) / np.sqrt(self.dim)
        patches[content] = self.words[flat[content]] + TOKEN_NOISE * noise[content]
        kinds = rng.integers(0, N_BACKGROUND, size=int((~content).sum()))
        patches[~content] = self.background[kinds] + BACKGROUND_NOISE * noise[~content]
        return _unit(patches), flat

    def document(self, doc: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """(pages, vectors, dim) patches and each page's patch words."""
        rng = np.random.default_rng([self.seed, 1, doc])
        doc_topics = rng.choice(N_TOPICS, size=TOPICS_PER_DOC, replace=False)
        pages = [self._page(rng, doc_topics) for _ in range(self.doc_pages(doc))]
        return np.stack([p for p, _ in pages]), [w for _, w in pages]

    def queries(self, n_queries: int) -> tuple[list[np.ndarray], np.ndarray]:
        """Queries of 15-30 vectors near the words of a random target page each."""
        rng = np.random.default_rng([self.seed, 2])
        targets = np.sort(rng.choice(self.n_pages, size=n_queries, replace=False))
        queries = []
        for target in targets:
            _, words = self.document(int(target) // PAGES_PER_DOC)
            present = np.unique(words[int(target) % PAGES_PER_DOC])
            present = present[present >= 0]
            n = int(rng.integers(QUERY_VECTORS[0], QUERY_VECTORS[1] + 1))
            picked = self.words[rng.choice(present, size=n)]
            noise = rng.normal(size=picked.shape) / np.sqrt(self.dim)
            queries.append(_unit(picked + QUERY_NOISE * noise))
        return queries, targets


def query_embedding(vectors: np.ndarray) -> PageEmbedding:
    return PageEmbedding(multivector=vectors, pooled=_unit(vectors.mean(axis=0)))


class ExactMaxSim:
    """Exact MaxSim of every query against every page in numpy, added document by document, so the
    ground truth is computed from the pages as the first build generates them (generating a
    ColQwen-shaped page costs more than scoring it: one pass instead of two)."""

    def __init__(self, corpus: Corpus, queries: list[np.ndarray]) -> None:
        self.flat = np.concatenate(queries)
        self.bounds = np.cumsum([0, *(len(q) for q in queries)])
        self.scores = np.full((len(queries), corpus.n_pages), -np.inf, dtype=np.float32)

    def scores_of(self, pages: np.ndarray) -> np.ndarray:
        """(queries, pages) exact MaxSim of (pages, vectors, dim): one document's pages, or one
        page's pooled vectors."""
        n, vectors, dim = pages.shape
        sims = (pages.reshape(-1, dim) @ self.flat.T).reshape(n, vectors, -1).max(axis=1)
        return np.stack(
            [sims[:, a:b].sum(1) for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True)]
        )

    def without_scores(self) -> ExactMaxSim:
        """A copy that scores pages but holds no score table: what a producer process is sent."""
        copy = object.__new__(ExactMaxSim)
        copy.flat, copy.bounds = self.flat, self.bounds
        copy.scores = np.empty((len(self.bounds) - 1, 0), dtype=np.float32)
        return copy

    def add(self, doc: int, scores: np.ndarray) -> None:
        """A document's (queries, pages) scores, from :meth:`scores_of`."""
        start = doc * PAGES_PER_DOC
        self.scores[:, start : start + scores.shape[1]] = scores

    def top(self) -> np.ndarray:
        """(queries, TOP_K) page indices, best first."""
        if np.isneginf(self.scores).any():
            raise RuntimeError("ground truth incomplete: a document was never scored")
        return np.argsort(-self.scores, axis=1, kind="stable")[:, :TOP_K]


@dataclass
class BuildTimes:
    """Where a build's seconds go: making the synthetic pages, scoring them into the ground
    truth (neither is the store's cost), laying them out in the store's layout (token pooling,
    MUVERA: in producer processes with ``--producers``, else inside the writes), writing them
    (the engine's upserts) and the index build at the end."""

    generate_s: float = 0.0
    truth_s: float = 0.0
    vectors_s: float = 0.0
    write_s: float = 0.0
    index_s: float = 0.0


def page_embeddings(corpus: Corpus, pages: np.ndarray) -> list[PageEmbedding]:
    """A document's pages as an encoder hands them over (patch grid, mean-pooled vector)."""
    return [
        PageEmbedding(multivector=p, pooled=_unit(p.mean(axis=0)), grid=corpus.grid) for p in pages
    ]


@dataclass
class Producer:
    """What a producer process makes documents from: the corpus, the queries each page is scored
    against (an ``ExactMaxSim`` without its score table) and the store's layout."""

    corpus: Corpus
    queries: ExactMaxSim | None
    layout: MultivectorLayout


_producer: Producer | None = None


def _start_producer(producer: Producer) -> None:
    global _producer
    _producer = producer


def _produce(doc: int) -> tuple[list[PageEmbedding], np.ndarray | None, BuildTimes]:
    """In a producer process: one document's pages laid out in the store's layout (what an
    indexing worker does beside its encoder), their exact scores, and the seconds of each."""
    assert _producer is not None
    corpus, times = _producer.corpus, BuildTimes()
    started = time.perf_counter()
    pages, _ = corpus.document(doc)
    times.generate_s = time.perf_counter() - started
    started = time.perf_counter()
    scores = None if _producer.queries is None else _producer.queries.scores_of(pages)
    times.truth_s = time.perf_counter() - started
    started = time.perf_counter()
    embeddings = [lay_out(e, _producer.layout, corpus.dim) for e in page_embeddings(corpus, pages)]
    times.vectors_s = time.perf_counter() - started
    return embeddings, scores, times


def documents(
    corpus: Corpus,
    exact: ExactMaxSim | None,
    layout: MultivectorLayout,
    producers: int,
    times: BuildTimes,
) -> Iterator[tuple[int, list[PageEmbedding]]]:
    """Each document's page embeddings in order, scored into ``exact``.

    With ``producers`` > 0 they are made in that many other processes, a few documents ahead,
    and laid out there in the store's layout, as indexing's encoder workers do: the writer only
    upserts. With none they are made in line, and the store lays them out as it writes. The
    seconds making, scoring and laying them out are counted either way."""
    if producers == 0:
        for doc in range(corpus.n_docs):
            started = time.perf_counter()
            pages, _ = corpus.document(doc)
            times.generate_s += time.perf_counter() - started
            if exact is not None:
                started = time.perf_counter()
                exact.add(doc, exact.scores_of(pages))
                times.truth_s += time.perf_counter() - started
            yield doc, page_embeddings(corpus, pages)
        return
    queries = None if exact is None else exact.without_scores()
    with ProcessPoolExecutor(
        producers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_producer,
        initargs=(Producer(corpus, queries, layout),),
    ) as pool:
        ahead = 2 * producers
        pending = {doc: pool.submit(_produce, doc) for doc in range(min(ahead, corpus.n_docs))}
        for doc in range(corpus.n_docs):
            embeddings, scores, spent = pending.pop(doc).result()
            if doc + ahead < corpus.n_docs:
                pending[doc + ahead] = pool.submit(_produce, doc + ahead)
            times.generate_s += spent.generate_s
            times.truth_s += spent.truth_s
            times.vectors_s += spent.vectors_s
            if exact is not None and scores is not None:
                exact.add(doc, scores)
            yield doc, embeddings


def fill(
    store: EdgePageStore, corpus: Corpus, exact: ExactMaxSim | None = None, producers: int = 0
) -> BuildTimes:
    """Write every page inside ``bulk_load`` (scoring it into ``exact`` when given)."""
    times = BuildTimes()
    with store.bulk_load():
        for doc, embeddings in documents(corpus, exact, store.layout, producers, times):
            n = len(embeddings)
            doc_id = f"doc{doc:05d}.pdf"
            schema = DocumentSchema(doc_id=doc_id, doc_version="v1", n_pages=n)
            records = [
                PageRecord(
                    doc_id=doc_id, doc_version="v1", page=p + 1, n_pages=n, text="", source=""
                )
                for p in range(n)
            ]
            started = time.perf_counter()
            store.upsert_document(schema, records, embeddings)
            times.write_s += time.perf_counter() - started
            if doc % 50 == 49:
                print(f"    {(doc + 1) * PAGES_PER_DOC:>7,} pages written", flush=True)
        indexing_started = time.perf_counter()
    times.index_s = time.perf_counter() - indexing_started
    return times


def memory() -> dict[str, int]:
    """This process's resident memory (bytes): total, anonymous, file-backed (mmap'd segments)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) * 1024
    return fields


def major_faults() -> int:
    """This process's major page faults so far (a read that had to wait for the disk)."""
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[9])


def read_into_page_cache(path: Path) -> float:
    """Read every file of the store once (seconds taken), so its searches are timed on the page
    cache a node that has served for a while holds, not on the disk reads of the first queries
    after a build (at 100,000 pages those doubled the CPU of a search: docs/backends.md)."""
    started = time.perf_counter()
    for file in path.rglob("*"):
        if file.is_file():
            with file.open("rb") as f:
                while f.read(1 << 24):
                    pass
    return time.perf_counter() - started


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def disk_parts(path: Path) -> dict[str, int]:
    """Bytes of the store folder by part: ``wal``, and per segment component (``payload_index``,
    ``payload_storage``, ``vector_storage-multi/tq_vectors``, ``vector_index-muvera``...), summed
    over segments."""
    parts: dict[str, int] = {}
    for file in path.rglob("*"):
        if not file.is_file():
            continue
        names = file.relative_to(path).parts
        if names[0] == "segments" and len(names) > 3:
            component = names[2]
            if component.startswith("vector_storage") and len(names) > 4:
                component = f"{component}/{names[3]}"
        else:
            component = names[0] if len(names) > 1 else "other"
        parts[component] = parts.get(component, 0) + file.stat().st_size
    return dict(sorted(parts.items(), key=lambda item: -item[1]))


@dataclass
class Row:
    layout: str
    pages: int
    vectors: int
    p50_ms: float
    p95_ms: float
    recall_at_10: float
    disk_bytes_per_page: float
    rss_bytes: int
    default: bool
    rss_anon_bytes: int = 0
    rss_file_bytes: int = 0
    build_s: float = 0.0
    upsert_pages_per_s: float = 0.0
    index_s: float = 0.0
    cpu_p50_ms: float = 0.0
    """CPU time of the process per search (all its threads): less load-dependent than wall."""
    ram_bytes_per_page: float = 0.0
    """Resident memory the open store adds while searching (RSS minus RSS before opening), a page."""
    major_faults_per_query: float = 0.0
    dim: int = 128
    prefetch: int = 0
    queries: int = 0
    vector_bytes_per_page: int = 0
    """The layout's vector data a page (``MultivectorLayout.vector_bytes``: no graph, payload)."""
    marginal_bytes_per_page: float = 0.0
    """Disk a page adds: (this store's bytes - the first document's store's) / (pages between)."""
    fixed_bytes: float = 0.0
    """Disk a store takes before its pages (the fit's intercept: preallocated chunks, log)."""
    disk_parts_per_page: dict[str, float] | None = None
    segments: int = 0
    """The store's segments while searching (each is searched on its own)."""

    def json_row(self) -> dict[str, object]:
        keys = ("layout", "pages", "vectors", "dim", "prefetch", "p50_ms", "p95_ms")
        keys += ("cpu_p50_ms", "recall_at_10", "disk_bytes_per_page", "ram_bytes_per_page")
        keys += ("vector_bytes_per_page", "marginal_bytes_per_page", "fixed_bytes")
        keys += ("rss_bytes", "build_s", "segments", "default")
        return {k: getattr(self, k) for k in keys}


def search_rows(
    store: EdgePageStore,
    name: str,
    corpus: Corpus,
    queries: list[np.ndarray],
    truth: np.ndarray,
    prefetches: list[int | None],
    rss_before: int,
) -> list[Row]:
    """One row per first-stage depth, over the same store (None: the store's own depth, sized
    to its pages)."""
    rows = []
    for prefetch in prefetches:
        depth = prefetch_for(corpus.n_pages) if prefetch is None else prefetch
        for query in queries[:3]:  # warm-up
            store.search(query_embedding(query), limit=TOP_K, prefetch_limit=prefetch)
        latencies, cpu, found = [], [], []
        faults = major_faults()
        for query in queries:
            started, cpu_started = time.perf_counter(), time.process_time()
            hits = store.search(query_embedding(query), limit=TOP_K, prefetch_limit=prefetch)
            latencies.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
            found.append(
                [int(h.record.doc_id[3:8]) * PAGES_PER_DOC + h.record.page - 1 for h in hits]
            )
        faults = major_faults() - faults
        resident = memory()
        recall = [len(set(f) & set(t)) / TOP_K for f, t in zip(found, truth, strict=True)]
        rows.append(
            Row(
                layout=name if len(prefetches) == 1 else f"{name}@{depth}",
                pages=corpus.n_pages,
                vectors=corpus.vectors,
                p50_ms=float(np.percentile(latencies, 50)),
                p95_ms=float(np.percentile(latencies, 95)),
                recall_at_10=float(np.mean(recall)),
                disk_bytes_per_page=0.0,
                rss_bytes=resident["VmRSS"],
                default=layout_of(name) == PAGE_IMAGE_LAYOUT,
                rss_anon_bytes=resident["RssAnon"],
                rss_file_bytes=resident["RssFile"],
                cpu_p50_ms=float(np.percentile(cpu, 50)),
                ram_bytes_per_page=(resident["VmRSS"] - rss_before) / corpus.n_pages,
                major_faults_per_query=faults / len(queries),
                dim=corpus.dim,
                prefetch=depth,
                queries=len(queries),
            )
        )
    return rows


def build(
    name: str, corpus: Corpus, path: Path, exact: ExactMaxSim | None, producers: int = 0
) -> BuildTimes:
    store = EdgePageStore(path, layout=layout_of(name), encoder_name=ENCODER_NAME, dim=corpus.dim)
    try:
        return fill(store, corpus, exact, producers)
    finally:
        store.close()


def fixed_and_marginal(name: str, corpus: Corpus, path: Path, disk: int) -> tuple[float, float]:
    """(fixed bytes a store, bytes a page) on disk: the line through this store and one holding
    the first document alone, built beside it."""
    small = Corpus(PAGES_PER_DOC, corpus.vectors, seed=corpus.seed, dim=corpus.dim)
    if corpus.n_pages <= small.n_pages:
        return 0.0, disk / corpus.n_pages
    small_path = path.with_name(f"{path.name}-first-document")
    build(name, small, small_path, None)
    small_disk = folder_bytes(small_path)
    shutil.rmtree(small_path, ignore_errors=True)
    marginal = (disk - small_disk) / (corpus.n_pages - small.n_pages)
    return small_disk - marginal * small.n_pages, marginal


def measure(
    name: str,
    corpus: Corpus,
    queries: list[np.ndarray],
    truth: np.ndarray | None,
    workdir: Path,
    prefetches: list[int | None],
    producers: int = 0,
) -> tuple[list[Row], np.ndarray, BuildTimes]:
    """The layout's rows, the ground truth (computed during this build when ``truth`` is None)
    and where the build's time went."""
    path = workdir / name
    exact = ExactMaxSim(corpus, queries) if truth is None else None
    times = build(name, corpus, path, exact, producers)
    if exact is not None:
        truth = exact.top()
    gc.collect()
    disk = folder_bytes(path)
    parts = disk_parts(path)
    rss_before = memory()["VmRSS"]
    cached_s = read_into_page_cache(path)
    print(f"  layout {name}: searching ({cached_s:,.0f} s to read the store once)", flush=True)
    store = EdgePageStore(path)  # reopened from its path alone: what a reader sees
    try:
        rows = search_rows(store, name, corpus, queries, truth, prefetches, rss_before)
        segments = store.shard.info().segments_count
    finally:
        store.close()
    shutil.rmtree(path, ignore_errors=True)
    fixed, marginal = fixed_and_marginal(name, corpus, path, disk)
    vector_bytes = layout_of(name).vector_bytes(corpus.vectors, corpus.dim, corpus.grid)
    for row in rows:
        row.disk_bytes_per_page = disk / corpus.n_pages
        row.build_s = times.vectors_s + times.write_s + times.index_s
        row.upsert_pages_per_s = corpus.n_pages / (times.vectors_s + times.write_s)
        row.index_s = times.index_s
        row.vector_bytes_per_page = vector_bytes
        row.fixed_bytes, row.marginal_bytes_per_page = fixed, marginal
        row.disk_parts_per_page = {k: v / corpus.n_pages for k, v in parts.items()}
        row.segments = segments
    return rows, truth, times


def accounting(row: Row, times: BuildTimes) -> str:
    """Where one layout's bytes and build seconds go."""
    parts = row.disk_parts_per_page or {}
    lines = [
        f"  {row.layout.split('@')[0]}: {row.disk_bytes_per_page:,.0f} B/page on disk at "
        f"{row.pages:,} pages = {row.fixed_bytes / 2**20:,.0f} MiB fixed + "
        f"{row.marginal_bytes_per_page:,.0f} B a page (vector data from the layout: "
        f"{row.vector_bytes_per_page:,} B a page), {row.segments} segments",
        f"    build: generate {times.generate_s:,.0f} s, ground truth {times.truth_s:,.0f} s, "
        f"lay out {times.vectors_s:,.0f} s (in producers; else inside the writes), "
        f"write {times.write_s:,.0f} s, index {times.index_s:,.0f} s",
    ]
    lines += [f"    {part}: {size:,.0f} B/page" for part, size in parts.items() if size >= 100]
    return "\n".join(lines)


def markdown(rows: list[Row]) -> str:
    lines = [
        "| layout@prefetch | pages | vectors x dim | build s (upsert pages/s, index s) "
        "| p50 / p95 ms | CPU ms p50 | recall@10 | disk B/page | RAM B/page "
        "| RSS MB (anon + file) | major faults/query | default |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.layout} | {r.pages:,} | {r.vectors} x {r.dim} | {r.build_s:,.0f} "
            f"({r.upsert_pages_per_s:,.0f}, {r.index_s:,.0f}) | {r.p50_ms:.1f} / {r.p95_ms:.1f} "
            f"| {r.cpu_p50_ms:.1f} | {r.recall_at_10:.3f} | {r.disk_bytes_per_page:,.0f} "
            f"| {r.ram_bytes_per_page:,.0f} | {r.rss_bytes / 2**20:,.0f} "
            f"({r.rss_anon_bytes / 2**20:,.0f} + {r.rss_file_bytes / 2**20:,.0f}) "
            f"| {r.major_faults_per_query:.1f} | {'yes' if r.default else ''} |"
        )
    return "\n".join(lines) + "\n"


CANDIDATE_STAGES: dict[str, Muvera | None] = {
    "muvera k4-r16": Muvera(),
    "muvera k5-r8": Muvera(k_sim=5, reps=8),
    "muvera 2k": Muvera(reps=8),
    "mean": None,
}
"""First stages compared by ``--candidate-recall``: MUVERA of 16 buckets x 16 repetitions (the
earlier default), of 32 x 8 (the same size: ``PAGE_IMAGE_LAYOUT``'s), of 16 x 8 (half the size),
and the page's mean (None)."""


def _stage_vector(stage: Muvera | None, vectors: np.ndarray, *, page: bool) -> np.ndarray:
    """What a first stage stores for a page (or is queried with): a MUVERA encoding, else the
    unit-length mean."""
    if stage is None:
        return _unit(vectors.mean(axis=0))
    return stage.encode_page(vectors) if page else stage.encode_query(vectors)


CANDIDATE_DEPTHS = (100, 200, 400, 800, 1600)
POOL_FACTORS = (2, 3)
RERANK_DEPTH = 800
"""Deepest first-stage candidates the pooled reranks are simulated on (each pools its pages):
past the sized depth at 300,000 pages (470)."""
RERANKED_STAGES = ("muvera k5-r8",)
"""The first stage whose candidates the pooled reranks are simulated on, the page-image
default's (pooling costs 27 ms a page: the union of every stage's candidates would take most of
an hour at 100,000 pages)."""


def _first_stage_scores(doc: int) -> tuple[int, dict[str, np.ndarray], np.ndarray]:
    """In a producer process: one document's vectors for each compared first stage (float16,
    as stored) and the pages' exact MaxSim scores."""
    assert _producer is not None and _producer.queries is not None
    pages, _ = _producer.corpus.document(doc)
    with threadpool_limits(limits=1, user_api="blas"):
        encodings = {
            name: np.stack([_stage_vector(stage, p, page=True) for p in pages]).astype(np.float16)
            for name, stage in CANDIDATE_STAGES.items()
        }
    return doc, encodings, _producer.queries.scores_of(pages)


def _pooled_scores(job: tuple[int, list[int]]) -> tuple[int, list[int], dict[int, np.ndarray]]:
    """In a producer process: the (queries, pages) MaxSim of the named pages of one document
    over their vectors pooled by each of :data:`POOL_FACTORS` (float32: the rerank without
    turbo8's coding error)."""
    assert _producer is not None and _producer.queries is not None
    doc, pages = job
    vectors, _ = _producer.corpus.document(doc)
    exact = _producer.queries
    with threadpool_limits(limits=1, user_api="blas"):
        scores = {
            factor: np.concatenate(
                [exact.scores_of(pool_tokens(vectors[p], factor)[None]) for p in pages], axis=1
            )
            for factor in POOL_FACTORS
        }
    return doc, pages, scores


def _recall(truth: np.ndarray, ranked: np.ndarray, depth: int = TOP_K) -> float:
    """Mean share of each query's exact top-10 among its first ``depth`` ranked pages."""
    return float(
        np.mean([len(set(t) & set(r[:depth])) / TOP_K for t, r in zip(truth, ranked, strict=True)])
    )


def candidate_recall(corpus: Corpus, queries: list[np.ndarray], producers: int) -> str:
    """Each stage's own loss, without a store (no HNSW, no turbo coding): recall of the exact
    MaxSim top-10 among the exact top-P of each compared first stage, then after an exact MaxSim
    rerank of those P pages over their vectors pooled by 2 and by 3 (float32). What a store
    loses beyond these is its HNSW search's and its coding's."""
    exact = ExactMaxSim(corpus, queries)
    encodings = {
        name: np.zeros(
            (corpus.n_pages, corpus.dim if stage is None else stage.dimension()), dtype=np.float16
        )
        for name, stage in CANDIDATE_STAGES.items()
    }
    producer = Producer(corpus, exact.without_scores(), PAGE_IMAGE_LAYOUT)
    with ProcessPoolExecutor(
        max(producers, 1),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_producer,
        initargs=(producer,),
    ) as pool:
        for doc, encoded, scores in pool.map(
            _first_stage_scores, range(corpus.n_docs), chunksize=4
        ):
            for name, values in encoded.items():
                encodings[name][doc * PAGES_PER_DOC : doc * PAGES_PER_DOC + len(values)] = values
            exact.add(doc, scores)
        truth = exact.top()
        depths = [d for d in CANDIDATE_DEPTHS if d <= corpus.n_pages]
        orders = {}
        for name, stage in CANDIDATE_STAGES.items():
            encoded_queries = np.stack([_stage_vector(stage, q, page=False) for q in queries])
            scores = np.concatenate(
                [
                    encodings[name][i : i + 10_000].astype(np.float32) @ encoded_queries.T
                    for i in range(0, corpus.n_pages, 10_000)
                ]
            )
            orders[name] = np.argsort(-scores, axis=0, kind="stable").T[:, : max(depths)]
        rerank_depth = min(RERANK_DEPTH, corpus.n_pages)
        wanted = np.unique(
            np.concatenate([orders[name][:, :rerank_depth].ravel() for name in RERANKED_STAGES])
        )
        pooled = {f: np.full(exact.scores.shape, -np.inf, dtype=np.float32) for f in POOL_FACTORS}
        jobs = [
            (
                int(doc),
                [int(p) - int(doc) * PAGES_PER_DOC for p in wanted[wanted // PAGES_PER_DOC == doc]],
            )
            for doc in np.unique(wanted // PAGES_PER_DOC)
        ]
        for doc, pages, scores in pool.map(_pooled_scores, jobs, chunksize=4):
            for factor, values in scores.items():
                pooled[factor][:, [doc * PAGES_PER_DOC + p for p in pages]] = values
    lines = [
        f"exact first stages and pooled reranks, {corpus.n_pages:,} pages, {len(queries)} "
        f"queries (recall of the exact MaxSim top-{TOP_K}; rerank: of the top-P by pooled MaxSim):",
        "| first stage | values | " + " | ".join(f"top-{d}" for d in depths) + " |",
        "|---|---:|" + "---:|" * len(depths),
    ]
    reranked: list[str] = []
    for name, order in orders.items():
        row = [_recall(truth, order, d) for d in depths]
        lines.append(
            f"| {name} | {encodings[name].shape[1]:,} | "
            + " | ".join(f"{r:.3f}" for r in row)
            + " |"
        )
        for factor in POOL_FACTORS if name in RERANKED_STAGES else ():
            cells = []
            for d in depths:
                if d > rerank_depth:
                    cells.append("-")
                    continue
                candidates = order[:, :d]
                values = np.take_along_axis(pooled[factor], candidates, axis=1)
                ranked = np.take_along_axis(
                    candidates, np.argsort(-values, axis=1, kind="stable"), 1
                )
                cells.append(f"{_recall(truth, ranked):.3f}")
            reranked.append(f"| {name} + pool {factor} | | " + " | ".join(cells) + " |")
    return "\n".join([*lines, *reranked])


def colqwen_tiny(pages: int, workdir: Path) -> str:
    """The tiny random ColQwen2.5 through render -> encode -> every layout -> search: each
    layout's top-3 for 8 queries against exact MaxSim over the unpooled vectors (token pooling
    runs colpali-engine's real pooler here). The random model's vectors mean nothing: this
    checks the whole path and how far a layout moves the ranking (a few pages' bytes are the
    engine's preallocation, not the layout's: sizes come from the synthetic runs)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from colqwen_tiny import tiny_model, tiny_processor
    from PIL import Image

    from llama_index_docmemo.encoders.colqwen import ColQwenEncoder
    from llama_index_docmemo.types import PageInput, PageRef

    processor = tiny_processor()
    encoder = ColQwenEncoder.from_model(tiny_model(processor), processor, name="colqwen2.5:tiny")
    rng = np.random.default_rng(0)
    images = [
        Image.fromarray(rng.integers(0, 255, (140, 100, 3), dtype=np.uint8)) for _ in range(pages)
    ]
    inputs = [
        PageInput(PageRef("tiny.pdf", i + 1), "", lambda im=im: im) for i, im in enumerate(images)
    ]
    embeddings = encoder.encode_pages(inputs)
    texts = [
        f"what is on page {word}" for word in ("one", "two", "3", "the chart", "x", "y", "z", "q")
    ]
    queries = encoder.encode_queries(texts)
    exact = [
        set(
            np.argsort([-(e.multivector @ q.multivector.T).max(axis=0).sum() for e in embeddings])[
                :3
            ]
            + 1
        )
        for q in queries
    ]
    lines = [
        f"tiny ColQwen2.5: {pages} pages, {len(embeddings[0].multivector)} vectors of "
        f"{encoder.dim}, grid {embeddings[0].grid}; recall@3 against exact unpooled MaxSim"
    ]
    schema = DocumentSchema(doc_id="tiny.pdf", doc_version="v1", n_pages=pages)
    records = [PageRecord("tiny.pdf", "v1", i + 1, pages, "", "") for i in range(pages)]
    for name, layout in LAYOUTS.items():
        path = workdir / f"tiny-{name}"
        store = EdgePageStore(path, encoder_name=encoder.name, dim=encoder.dim, layout=layout)
        with store, store.bulk_load():
            store.upsert_document(schema, records, embeddings)
        with EdgePageStore(path) as store:
            found = [{h.record.page for h in store.search(q, limit=3)} for q in queries]
        recall = np.mean([len(f & t) / 3 for f, t in zip(found, exact, strict=True)])
        lines.append(f"  {name}: recall@3 {recall:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--vectors", type=int, default=768)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument(
        "--prefetch",
        type=int,
        nargs="+",
        default=[None],
        help="first-stage candidates (each a row; default: the store's own, sized to the pages "
        "by operations.prefetch_for)",
    )
    parser.add_argument("--dim", type=int, default=128, help="width of each vector")
    parser.add_argument("--truth", type=Path, help="cache file for the exact top-10 (.npy)")
    parser.add_argument(
        "--layouts",
        nargs="+",
        default=[n for n, layout in LAYOUTS.items() if layout.token_pool_factor == 1],
        choices=[DEFAULT, *sorted(LAYOUTS)],
        help="layouts to build (default: every one without token pooling, whose 27 ms of CPU a "
        f"page slows builds); '{DEFAULT}': the page-image default alone (it pools)",
    )
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--out", type=Path, help="folder for the Markdown table and full rows")
    parser.add_argument(
        "--workdir", type=Path, help="where the stores are built (default: a temp dir)"
    )
    parser.add_argument(
        "--colqwen-tiny", action="store_true", help="run the tiny ColQwen through every layout"
    )
    parser.add_argument(
        "--candidate-recall",
        action="store_true",
        help="no store: recall of the exact top-10 among each exact first stage's top-P, then "
        "after exact reranks pooled by 2 and 3 (each stage's own loss: no HNSW, no coding)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--producers",
        type=int,
        default=0,
        help="processes making the synthetic pages and their ground truth while this one writes "
        "(default 0: made in line; 1 gives the writes a core of their own on 2 cores)",
    )
    args = parser.parse_args(argv)
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="store_scale_", dir=args.workdir))
    try:
        if args.colqwen_tiny:
            print(colqwen_tiny(min(args.pages, 64), workdir))
            return
        corpus = Corpus(args.pages, args.vectors, seed=args.seed, dim=args.dim)
        if args.candidate_recall:
            print(candidate_recall(corpus, corpus.queries(args.queries)[0], args.producers))
            return
        queries, _ = corpus.queries(args.queries)
        cached = args.truth is not None and args.truth.is_file()
        truth: np.ndarray | None = np.load(args.truth) if cached else None
        print(
            f"{args.pages:,} pages x {args.vectors} x {args.dim}-d (grid {corpus.grid})", flush=True
        )
        rows: list[Row] = []
        for name in args.layouts:
            print(f"  layout {name}: building", flush=True)
            layout_rows, truth, times = measure(
                name, corpus, queries, truth, workdir, args.prefetch, args.producers
            )
            if args.truth is not None and not cached:
                np.save(args.truth, truth)
                cached = True
            for row in layout_rows:
                rows.append(row)
                print(json.dumps(asdict(row)), flush=True)
            print(accounting(layout_rows[0], times), flush=True)
        table = markdown(rows)
        print(table)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps([r.json_row() for r in rows], indent=2))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            stem = f"store_scale_{args.pages}"
            (args.out / f"{stem}.md").write_text(table)
            (args.out / f"{stem}.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
