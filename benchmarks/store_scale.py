"""Page-store scale: synthetic ColQwen-shaped multivectors at 1k / 10k / 100k pages.

Measures, per backend and size: upsert throughput, per-query latency (p50/p95) of the store's
two-stage search (pooled prefetch + MaxSim rerank) and of exact MaxSim through the store
(prefetch over every page), recall@10 of the two-stage search against exact MaxSim computed
in numpy, and bytes per page for float32 / float16 / binary multivectors.

Synthetic data, built so that recall means something: a vocabulary of "word" vectors grouped
by topic (words of a topic share its direction); each page uses 24 words of 2 of its
document's topics, and 60% of its tokens are noisy copies of a few "background" vectors
shared by every page (margins, white space: what blurs mean-pooled vectors together), the
rest noisy copies of its words. A query is 20 noisy tokens of 5 words of one page, so its exact
top-10 is the pages sharing most of those words, which the pooled prefetch must find.

    python benchmarks/store_scale.py --out reports/store_scale
    python benchmarks/store_scale.py --sizes 1000 --url http://127.0.0.1:6333
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore, PageStore, QdrantClientPageStore
from llama_index_docmemo.types import PageEmbedding, PageRecord

DIM = 128
QUERY_TOKENS = 20
TOP_K = 10
PAGES_PER_DOC = 100
N_TOPICS = 256
WORDS_PER_TOPIC = 64
WORD_SPREAD = 1.0
TOPICS_PER_DOC = 6
TOPICS_PER_PAGE = 2
WORDS_PER_PAGE = 24
QUERY_WORDS = 5
N_BACKGROUND = 8
BACKGROUND_SHARE = 0.6
TOKEN_NOISE = 0.5
QUERY_NOISE = 0.5
# Vectors per page by corpus size: the real ColQwen2.5 shape (~768) where it fits in time and
# 24 GiB, fewer where the store, the numpy ground truth and Python list conversion would not.
STORE: dict[str, object] = {"encoder_name": "synthetic", "dim": DIM}
DEFAULT_VECTORS = {1_000: 768, 10_000: 128, 100_000: 64}


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@dataclass(frozen=True)
class Corpus:
    """Deterministic synthetic pages: any document can be regenerated from (seed, doc index)."""

    n_pages: int
    vectors: int
    seed: int = 0
    background: np.ndarray = field(init=False, repr=False)
    words: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng([self.seed, 0])
        topics = _unit(rng.normal(size=(N_TOPICS, 1, DIM)))
        spread = rng.normal(size=(N_TOPICS, WORDS_PER_TOPIC, DIM)) / np.sqrt(DIM)
        object.__setattr__(self, "background", _unit(rng.normal(size=(N_BACKGROUND, DIM))))
        object.__setattr__(self, "words", _unit(topics + WORD_SPREAD * spread).reshape(-1, DIM))

    @property
    def n_docs(self) -> int:
        return -(-self.n_pages // PAGES_PER_DOC)

    def doc_pages(self, doc: int) -> int:
        return min(PAGES_PER_DOC, self.n_pages - doc * PAGES_PER_DOC)

    def _page_words(self, rng: np.random.Generator, doc_topics: np.ndarray) -> np.ndarray:
        topics = rng.choice(doc_topics, size=TOPICS_PER_PAGE, replace=False)
        pool = (topics[:, None] * WORDS_PER_TOPIC + np.arange(WORDS_PER_TOPIC)).ravel()
        return rng.choice(pool, size=WORDS_PER_PAGE, replace=False)

    def document(self, doc: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """(pages, vectors, DIM) unit tokens and each page's word ids."""
        rng = np.random.default_rng([self.seed, 1, doc])
        n = self.doc_pages(doc)
        doc_topics = rng.choice(N_TOPICS, size=TOPICS_PER_DOC, replace=False)
        page_words = [self._page_words(rng, doc_topics) for _ in range(n)]
        content = rng.random((n, self.vectors)) >= BACKGROUND_SHARE
        word_tokens = np.stack(
            [w[rng.integers(0, WORDS_PER_PAGE, self.vectors)] for w in page_words]
        )
        centres = np.where(
            content[..., None],
            self.words[word_tokens],
            self.background[rng.integers(0, N_BACKGROUND, size=(n, self.vectors))],
        )
        noise = TOKEN_NOISE * rng.normal(size=(n, self.vectors, DIM)) / np.sqrt(DIM)
        return _unit(centres + noise), page_words

    def queries(self, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
        """(n, QUERY_TOKENS, DIM) queries: a few words of a random page, with fresh noise."""
        rng = np.random.default_rng([self.seed, 2])
        targets = np.sort(rng.choice(self.n_pages, size=n_queries, replace=False))
        out = np.empty((n_queries, QUERY_TOKENS, DIM), dtype=np.float32)
        for i, target in enumerate(targets):
            _, page_words = self.document(int(target) // PAGES_PER_DOC)
            chosen = rng.choice(page_words[int(target) % PAGES_PER_DOC], QUERY_WORDS, replace=False)
            picked = self.words[chosen[rng.integers(0, QUERY_WORDS, QUERY_TOKENS)]]
            out[i] = _unit(picked + QUERY_NOISE * rng.normal(size=picked.shape) / np.sqrt(DIM))
        return out, targets


def embedding(tokens: np.ndarray) -> PageEmbedding:
    mean = tokens.mean(axis=0)
    return PageEmbedding(multivector=tokens, pooled=_unit(mean))


def documents(corpus: Corpus) -> Iterator[tuple[int, np.ndarray]]:
    for doc in range(corpus.n_docs):
        yield doc, corpus.document(doc)[0]


def exact_scores(corpus: Corpus, queries: np.ndarray) -> np.ndarray:
    """(queries, pages) MaxSim by numpy, streamed document by document."""
    scores = np.empty((len(queries), corpus.n_pages), dtype=np.float32)
    flat_queries = queries.reshape(-1, DIM)
    for doc, tokens in documents(corpus):
        n = len(tokens)
        sims = tokens.reshape(-1, DIM) @ flat_queries.T  # (n*vectors, q*tokens)
        best = sims.reshape(n, corpus.vectors, len(queries), QUERY_TOKENS).max(axis=1)
        start = doc * PAGES_PER_DOC
        scores[:, start : start + n] = best.sum(axis=2).T
    return scores


def page_index(record: PageRecord) -> int:
    return int(record.doc_id.removeprefix("doc")) * PAGES_PER_DOC + record.page - 1


def fill(store: PageStore, corpus: Corpus) -> float:
    """Upsert every page; returns seconds spent inside the store (generation excluded)."""
    spent = 0.0
    for doc, tokens in documents(corpus):
        n = len(tokens)
        doc_id = f"doc{doc:05d}"
        schema = DocumentSchema(doc_id=doc_id, doc_version="v1", n_pages=n)
        records = [
            PageRecord(doc_id=doc_id, doc_version="v1", page=p + 1, n_pages=n, text="", source="")
            for p in range(n)
        ]
        embeddings = [embedding(t) for t in tokens]
        start = time.perf_counter()
        store.upsert_document(schema, records, embeddings)
        spent += time.perf_counter() - start
    return spent


def timed_search(
    store: PageStore, queries: np.ndarray, prefetch: int
) -> tuple[list[float], list[list[int]]]:
    latencies: list[float] = []
    results: list[list[int]] = []
    for query in queries:
        q = embedding(query)
        start = time.perf_counter()
        hits = store.search(q, limit=TOP_K, prefetch_limit=prefetch)
        latencies.append((time.perf_counter() - start) * 1000)
        results.append([page_index(h.record) for h in hits])
    return latencies, results


def recall_at_k(results: list[list[int]], truth: np.ndarray) -> float:
    return float(
        np.mean([len(set(r) & set(t)) / TOP_K for r, t in zip(results, truth, strict=True)])
    )


@dataclass
class Row:
    backend: str
    pages: int
    vectors: int
    upsert_pages_per_s: float
    optimize_s: float
    prefetch: int
    two_stage_p50_ms: float
    two_stage_p95_ms: float
    recall_at_10: float
    by_prefetch: dict[int, tuple[float, float]]  # depth -> (recall@10, p50 ms)
    exact_p50_ms: float | None
    exact_p95_ms: float | None
    exact_recall_at_10: float | None
    queries: int


def measure(
    backend: str,
    open_store: Callable[[], PageStore],
    corpus: Corpus,
    queries: np.ndarray,
    truth: np.ndarray,
    *,
    prefetch: int,
    sweep: tuple[int, ...],
    exact_queries: int,
) -> Row:
    store = open_store()
    try:
        upsert_s = fill(store, corpus)
        start = time.perf_counter()
        if isinstance(store, EdgePageStore):
            store.optimize()
        optimize_s = time.perf_counter() - start
        timed_search(store, queries[:3], prefetch)  # warm caches
        latencies, results = timed_search(store, queries, prefetch)
        by_prefetch = {prefetch: (recall_at_k(results, truth), float(np.median(latencies)))}
        for depth in sweep:
            if depth != prefetch:
                lat, res = timed_search(store, queries, depth)
                by_prefetch[depth] = (recall_at_k(res, truth), float(np.median(lat)))
        exact_lat: list[float] = []
        exact_recall = None
        if exact_queries:
            exact_lat, exact_res = timed_search(store, queries[:exact_queries], corpus.n_pages)
            exact_recall = recall_at_k(exact_res, truth[:exact_queries])
    finally:
        store.close()
    return Row(
        backend=backend,
        pages=corpus.n_pages,
        vectors=corpus.vectors,
        upsert_pages_per_s=corpus.n_pages / upsert_s,
        optimize_s=optimize_s,
        prefetch=prefetch,
        two_stage_p50_ms=float(np.percentile(latencies, 50)),
        two_stage_p95_ms=float(np.percentile(latencies, 95)),
        recall_at_10=by_prefetch[prefetch][0],
        by_prefetch=dict(sorted(by_prefetch.items())),
        exact_p50_ms=float(np.percentile(exact_lat, 50)) if exact_lat else None,
        exact_p95_ms=float(np.percentile(exact_lat, 95)) if exact_lat else None,
        exact_recall_at_10=exact_recall,
        queries=len(queries),
    )


def bytes_per_page(vectors: int) -> dict[str, int]:
    """Multivector bytes per page by storage type, plus the float32 pooled vector."""
    pooled = DIM * 4
    return {
        "float32": vectors * DIM * 4 + pooled,
        "float16": vectors * DIM * 2 + pooled,
        "binary": vectors * DIM // 8 + pooled,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(rows: list[Row], disk: dict[str, float]) -> str:
    lines = [
        "| backend | pages | vectors/page | upsert pages/s | optimize s | two-stage p50 / p95 ms "
        "| recall@10 (prefetch) | prefetch: recall@10 / p50 ms | exact p50 / p95 ms | exact recall |",
        "|---|---:|---:|---:|---:|---|---|---|---|---|",
    ]
    for r in rows:
        sweep = ", ".join(f"{k}: {v[0]:.3f} / {v[1]:.1f}" for k, v in r.by_prefetch.items())
        exact = "-" if r.exact_recall_at_10 is None else f"{r.exact_recall_at_10:.3f}"
        lines.append(
            f"| {r.backend} | {r.pages:,} | {r.vectors} | {r.upsert_pages_per_s:,.0f} "
            f"| {r.optimize_s:.1f} | {r.two_stage_p50_ms:.1f} / {r.two_stage_p95_ms:.1f} "
            f"| {r.recall_at_10:.3f} ({r.prefetch}) | {sweep} "
            f"| {_ms(r.exact_p50_ms)} / {_ms(r.exact_p95_ms)} | {exact} |"
        )
    lines += [
        "",
        "| vectors/page | float32 B/page | float16 B/page | binary B/page |",
        "|---:|---:|---:|---:|",
    ]
    for vectors in sorted({r.vectors for r in rows}):
        b = bytes_per_page(vectors)
        lines.append(f"| {vectors} | {b['float32']:,} | {b['float16']:,} | {b['binary']:,} |")
    if disk:
        lines += ["", "Qdrant Edge shard on disk (float32 multivectors, WAL included):", ""]
        lines += [f"- {k}: {v:,.0f} bytes/page" for k, v in disk.items()]
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for backend in dict.fromkeys(r.backend for r in rows):
        mine = sorted((r for r in rows if r.backend == backend), key=lambda r: r.pages)
        xs = [r.pages for r in mine]
        ax.plot(xs, [r.two_stage_p50_ms for r in mine], "o-", label=f"{backend} two-stage p50")
        exact = [(r.pages, r.exact_p50_ms) for r in mine if r.exact_p50_ms is not None]
        if exact:
            ax.plot(*zip(*exact, strict=True), "s--", label=f"{backend} exact MaxSim p50")
        for r in mine:
            ax.annotate(f"{r.vectors} v/p", (r.pages, r.two_stage_p50_ms), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pages")
    ax.set_ylabel("latency per query (ms)")
    ax.set_title("Page store: two-stage vs exact MaxSim (synthetic 128-d multivectors)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=sorted(DEFAULT_VECTORS))
    parser.add_argument("--vectors", type=int, help="vectors per page at every size")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--exact-queries", type=int, default=5, help="exact MaxSim timed on these")
    parser.add_argument("--prefetch", type=int, default=200, help="the store's default depth")
    parser.add_argument("--sweep", type=int, nargs="*", default=[25, 50, 100, 400])
    parser.add_argument("--url", help="a Qdrant server: also measure QdrantClientPageStore there")
    parser.add_argument(
        "--local-max", type=int, default=1_000, help="largest size for client local mode"
    )
    parser.add_argument("--local-queries", type=int, default=5, help="queries in local mode")
    parser.add_argument("--out", type=Path, default=Path("reports/store_scale"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    rows: list[Row] = []
    disk: dict[str, float] = {}
    for size in args.sizes:
        vectors = args.vectors or DEFAULT_VECTORS.get(size, 64)
        corpus = Corpus(size, vectors, seed=args.seed)
        queries, _ = corpus.queries(args.queries)
        start = time.perf_counter()
        truth = np.argsort(-exact_scores(corpus, queries), axis=1)[:, :TOP_K]
        print(
            f"{size} pages x {vectors}: numpy exact MaxSim {time.perf_counter() - start:.1f}s",
            flush=True,
        )
        backends: list[tuple[str, Callable[[], PageStore]]] = []
        workdir = Path(tempfile.mkdtemp(prefix="store_scale_"))
        backends.append(("edge", lambda w=workdir: EdgePageStore(w / "edge", **STORE)))
        if size <= args.local_max:
            backends.append(
                ("client-local", lambda: QdrantClientPageStore(location=":memory:", **STORE))
            )
        if args.url:
            collection = f"docmemo_scale_{size}"
            backends.append(
                (
                    "server",
                    lambda c=collection: QdrantClientPageStore(
                        url=args.url, collection=c, timeout=120, **STORE
                    ),
                )
            )
        for name, opener in backends:
            local = name == "client-local"
            n_queries = args.local_queries if local else len(queries)
            row = measure(
                name,
                opener,
                corpus,
                queries[:n_queries],
                truth[:n_queries],
                prefetch=args.prefetch,
                sweep=() if local else tuple(args.sweep),
                exact_queries=min(args.exact_queries, n_queries),
            )
            print(json.dumps(asdict(row)), flush=True)
            rows.append(row)
            if name == "edge":
                disk[f"{size:,} pages x {vectors}"] = folder_bytes(workdir / "edge") / size
        shutil.rmtree(workdir, ignore_errors=True)

    (args.out / "store_scale.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    (args.out / "store_scale.md").write_text(markdown(rows, disk))
    plot(rows, args.out / "store_scale.png")
    print(markdown(rows, disk))
    print(f"wrote {args.out}/store_scale.md, .json, .png")


if __name__ == "__main__":
    main()
