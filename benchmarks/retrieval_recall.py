"""Page retrieval within each question's document: recall@k and all-hit@k for every encoder tried.

Usage:
    python benchmarks/retrieval_recall.py --data DIR [--encoders a,b,c] [--limit N] [--out FILE.md]
        [--ocr auto|off] [--store]

DIR is the data root (holding mmlongbench-doc/ and/or financebench/) or one set folder (holding
qa.jsonl and pdfs/); default $DOCMEMO_DATA. Questions: answerable (gold pages given) with
``evidence_valid``. Page text comes from ``llama_index_docmemo.ingest.pdf.read_pdf`` (PyMuPDF text
layer, Tesseract OCR for image-only pages when ``--ocr auto`` finds it), read once per run.

Rows other than ``store-*`` rank the pages of the question's document in memory, emulating the
store's query: the dense branch takes the top ``prefetch`` pages by the pooled vector and reranks
them by MaxSim; the lexical branch scores BM25 terms times IDF over the document's pages (what
the store's default ``idf_scope="filter"`` does under a doc_ids filter). ``store-*`` rows index every
PDF into a temporary Qdrant Edge store with the default encoder and search it with a doc_ids
filter: the path users get. Exploratory variants live here; the package keeps only the default.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llama_index_docmemo.encoders.base import Bm25Lexical
from llama_index_docmemo.encoders.wordllama import WordLlamaEncoder, load_wordllama
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageInput, PageRef

KS = (1, 3, 5, 10)
PREFETCH = 200  # the store's default prefetch depth
Ranking = list[int]  # 1-based pages, best first


@dataclass(frozen=True)
class Question:
    qid: str
    doc_id: str
    text: str
    gold: frozenset[int]


@dataclass
class DataSet:
    name: str
    folder: Path
    questions: list[Question]
    texts: dict[str, list[str]]  # doc -> page texts (index 0 = page 1)


# ---------------------------------------------------------------- data


def set_folders(root: Path) -> list[Path]:
    if (root / "qa.jsonl").is_file():
        return [root]
    found = [root / name for name in ("mmlongbench-doc", "financebench")]
    found = [f for f in found if (f / "qa.jsonl").is_file()]
    if not found:
        sys.exit(f"{root}: no qa.jsonl there nor in mmlongbench-doc/ or financebench/ below it")
    return found


def load_questions(folder: Path, limit: int | None) -> list[Question]:
    out: list[Question] = []
    for line in (folder / "qa.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["evidence_pages"] and row.get("evidence_valid", True):
            out.append(
                Question(row["qid"], row["doc"], row["question"], frozenset(row["evidence_pages"]))
            )
    return out[:limit] if limit else out


class CachedOcr:
    """Wraps an OCR engine so the store rows reuse what the text pass already read."""

    def __init__(self, engine: object) -> None:
        self.engine = engine
        self.name = getattr(engine, "name", "ocr")
        self._seen: dict[tuple[str, int], str] = {}

    def read(self, page: object) -> str:
        key = (str(page.parent.name), int(page.number))  # type: ignore[attr-defined]
        if key not in self._seen:
            self._seen[key] = self.engine.read(page)  # type: ignore[attr-defined]
        return self._seen[key]


def load_set(folder: Path, limit: int | None, ocr: CachedOcr | None) -> DataSet:
    from llama_index_docmemo.ingest.pdf import read_pdf

    questions = load_questions(folder, limit)
    texts: dict[str, list[str]] = {}
    for doc_id in sorted({q.doc_id for q in questions}):
        parsed = read_pdf(folder / "pdfs" / doc_id, ocr=ocr)  # type: ignore[arg-type]
        texts[doc_id] = [page.text for page in parsed.pages]
    return DataSet(folder.name, folder, questions, texts)


# ---------------------------------------------------------------- scoring


def rank(scores: np.ndarray, keep: np.ndarray | None = None) -> Ranking:
    """1-based pages by descending score (ties: lower page first), only ``keep`` ones if given."""
    order = np.argsort(-scores, kind="stable")
    if keep is not None:
        order = order[keep[order]]
    return [int(i) + 1 for i in order]


def rrf(rankings: Sequence[Ranking], k: int = 2, weights: Sequence[float] | None = None) -> Ranking:
    """Qdrant's reciprocal-rank fusion: sum of weight / (k + rank), rank 1-based."""
    scores: dict[int, float] = defaultdict(float)
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings), strict=True):
        for position, page in enumerate(ranking):
            scores[page] += weight / (k + position + 1)
    return sorted(scores, key=lambda page: (-scores[page], page))


def dbsf(branches: Sequence[tuple[np.ndarray, np.ndarray]]) -> Ranking:
    """Qdrant's distribution-based fusion: each branch's scores mapped by mean +- 3 std to [0, 1]."""
    total: np.ndarray | None = None
    union = None
    for scores, keep in branches:
        normed = np.zeros_like(scores, dtype=np.float64)
        values = scores[keep]
        if values.size:
            low, high = values.mean() - 3 * values.std(), values.mean() + 3 * values.std()
            normed[keep] = np.clip((values - low) / (high - low), 0, 1) if high > low else 0.5
        total = normed if total is None else total + normed
        union = keep if union is None else union | keep
    assert total is not None and union is not None
    return rank(total, union)


class Lexical:
    """BM25 scores with IDF over the document's pages ("filter") or the whole set ("corpus")."""

    def __init__(self, data: DataSet, idf_scope: str) -> None:
        self.model = Bm25Lexical()
        self.pages = {
            doc: [
                dict(zip(v.indices, v.values, strict=True))
                for v in map(self.model.embed_page, texts)
            ]
            for doc, texts in data.texts.items()
        }
        corpus = [p for pages in self.pages.values() for p in pages]
        self.idf = {
            doc: _idf(pages if idf_scope == "filter" else corpus)
            for doc, pages in self.pages.items()
        }

    def scores(self, q: Question) -> tuple[np.ndarray, np.ndarray]:
        terms = self.model.embed_query(q.text).indices
        idf = self.idf[q.doc_id]
        scores = np.array(
            [sum(idf.get(t, 0.0) * p.get(t, 0.0) for t in terms) for p in self.pages[q.doc_id]]
        )
        return scores, scores > 0


def _idf(pages: Sequence[dict[int, float]]) -> dict[int, float]:
    """Qdrant's IDF modifier: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    df = Counter(t for p in pages for t in p)
    return {t: math.log(1 + (len(pages) - n + 0.5) / (n + 0.5)) for t, n in df.items()}


class Dense:
    """A WordLlama window encoder's MaxSim and pooled rankings, with the store's prefetch."""

    def __init__(self, data: DataSet, encoder: WordLlamaEncoder) -> None:
        self.encoder = encoder
        started = time.perf_counter()
        self.pages = {
            doc: encoder.encode_pages(
                [PageInput(PageRef(doc, i + 1), t) for i, t in enumerate(texts)]
            )
            for doc, texts in data.texts.items()
        }
        n = sum(len(v) for v in self.pages.values())
        self.pages_per_s = n / (time.perf_counter() - started)

    def scores(self, q: Question) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(MaxSim, pooled cosine, in-prefetch mask) over the document's pages."""
        query = self.encoder.encode_query(q.text)
        pages = self.pages[q.doc_id]
        maxsim = np.array(
            [float((p.multivector @ query.multivector.T).max(axis=0).sum()) for p in pages]
        )
        pooled = np.array([float(p.pooled @ query.pooled) for p in pages])
        keep = np.zeros(len(pages), dtype=bool)
        keep[np.argsort(-pooled, kind="stable")[:PREFETCH]] = True
        return maxsim, pooled, keep


class TokenMaxSim:
    """Raw WordLlama token vectors as the multivector (the calibration row), optionally with query
    tokens weighted by their IDF over the set's pages (not expressible in a cosine MaxSim store)."""

    def __init__(self, data: DataSet, idf_weighted: bool) -> None:
        self.embedding, self.tokenizer = load_wordllama(256)
        unit = self.embedding / np.linalg.norm(self.embedding, axis=1, keepdims=True)
        self.unit = unit.astype(np.float32)
        self.idf_weighted = idf_weighted
        self.pages = {doc: [self._ids(t) for t in texts] for doc, texts in data.texts.items()}
        df = Counter(t for pages in self.pages.values() for ids in pages for t in ids.tolist())
        n = sum(len(p) for p in self.pages.values())
        self.idf = np.full(len(self.embedding), math.log(1 + (n + 0.5) / 0.5), dtype=np.float32)
        for t, count in df.items():
            self.idf[t] = math.log(1 + (n - count + 0.5) / (count + 0.5))

    def _ids(self, text: str) -> np.ndarray:
        return np.unique(
            np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        )

    def scores(self, q: Question) -> np.ndarray:
        ids = self._ids(q.text)
        weights = self.idf[ids] if self.idf_weighted else np.ones(len(ids), dtype=np.float32)
        query = self.unit[ids]
        return np.array(
            [
                float((query @ self.unit[p].T).max(axis=1) @ weights)
                if p.size and ids.size
                else 0.0
                for p in self.pages[q.doc_id]
            ]
        )


# ---------------------------------------------------------------- variants


Variant = Callable[[DataSet], Callable[[Question], Ranking]]


def _bm25(scope: str) -> Variant:
    def build(data: DataSet) -> Callable[[Question], Ranking]:
        lexical = Lexical(data, scope)
        return lambda q: rank(lexical.scores(q)[0])  # unmatched pages last, as bm25s ranks them

    return build


def _bm25s_plain(data: DataSet) -> Callable[[Question], Ranking]:
    """bm25s with its English stopwords, no stemming, one index per document (issue 2's baseline)."""
    import bm25s

    indexes = {}
    for doc, texts in data.texts.items():
        if any(t.strip() for t in texts):  # bm25s cannot index a document without words
            indexes[doc] = bm25s.BM25()
            tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
            indexes[doc].index(tokens, show_progress=False)

    def ranking(q: Question) -> Ranking:
        if q.doc_id not in indexes:
            return rank(np.zeros(len(data.texts[q.doc_id])))
        tokens = bm25s.tokenize([q.text], stopwords="en", return_ids=False, show_progress=False)
        scores = np.asarray(indexes[q.doc_id].get_scores(tokens[0]), dtype=np.float64)
        return rank(np.nan_to_num(scores))

    return ranking


def _tokens(idf_weighted: bool) -> Variant:
    def build(data: DataSet) -> Callable[[Question], Ranking]:
        model = TokenMaxSim(data, idf_weighted)
        return lambda q: rank(model.scores(q))

    return build


def _dense(dim: int, window: int, pooled_only: bool = False) -> Variant:
    def build(data: DataSet) -> Callable[[Question], Ranking]:
        dense = Dense(data, WordLlamaEncoder(dim=dim, window=window, lexical=False))

        def ranking(q: Question) -> Ranking:
            maxsim, pooled, keep = dense.scores(q)
            return rank(pooled) if pooled_only else rank(maxsim, keep)

        return ranking

    return build


def _fused(
    fusion: str, dim: int = 256, window: int = 24, weights: tuple[float, float] = (1.0, 1.0)
) -> Variant:
    def build(data: DataSet) -> Callable[[Question], Ranking]:
        dense = Dense(data, WordLlamaEncoder(dim=dim, window=window, lexical=False))
        lexical = Lexical(data, "filter")

        def ranking(q: Question) -> Ranking:
            maxsim, _, keep = dense.scores(q)
            bm25, matched = lexical.scores(q)
            if fusion == "dbsf":
                return dbsf([(maxsim, keep), (bm25, matched)])
            return rrf(
                [rank(maxsim, keep)[:PREFETCH], rank(bm25, matched)[:PREFETCH]], weights=weights
            )

        return ranking

    return build


VARIANTS: dict[str, Variant] = {
    "bm25s-nostem": _bm25s_plain,
    "bm25": _bm25("filter"),
    "bm25-corpus-idf": _bm25("corpus"),
    "wl-tokens": _tokens(False),
    "wl-tokens-qidf": _tokens(True),
    "wl-256-w12": _dense(256, 12),
    "wl-256-w24": _dense(256, 24),
    "wl-256-w48": _dense(256, 48),
    "wl-128-w24": _dense(128, 24),
    "wl-64-w24": _dense(64, 24),
    "wl-256-w24-pooled": _dense(256, 24, pooled_only=True),
    "default-rrf": _fused("rrf"),
    "default-rrf-bm25x3": _fused("rrf", weights=(1.0, 3.0)),
    "default-dbsf": _fused("dbsf"),
    "wl-64-w24+bm25-rrf": _fused("rrf", dim=64),
}
STORE_VARIANTS = ("store-rrf", "store-dbsf", "store-rrf-collection-idf")


def store_rankings(
    data: DataSet, names: Sequence[str], ocr: CachedOcr | None
) -> dict[str, Callable[[Question], Ranking]]:
    """Index the set's PDFs with the default encoder into a temporary Edge store, then search it."""
    from llama_index_docmemo.encoders import default_encoder
    from llama_index_docmemo.indexing import DocumentIndexer
    from llama_index_docmemo.store.edge import EdgePageStore

    encoder = default_encoder()
    folder = Path(tempfile.mkdtemp(prefix="docmemo-recall-")) / "store"
    common = {"encoder_name": encoder.name, "dim": encoder.dim, "sparse": encoder.sparse}
    with EdgePageStore(folder, **common) as store:  # type: ignore[arg-type]
        paths = [data.folder / "pdfs" / doc for doc in data.texts]
        report = DocumentIndexer(store, encoder, ocr=ocr if ocr is not None else False).index_paths(
            paths
        )
        if report.failed:
            sys.exit(f"indexing failed: {report.failed}")
    queries = {q.qid: encoder.encode_query(q.text) for q in data.questions}
    out: dict[str, Callable[[Question], Ranking]] = {}
    for name in names:
        fusion = "dbsf" if "dbsf" in name else "rrf"
        scope = "collection" if name.endswith("collection-idf") else "filter"
        with EdgePageStore(folder, fusion=fusion, idf_scope=scope, **common) as store:  # type: ignore[arg-type]
            found = {
                q.qid: [
                    hit.record.page
                    for hit in store.search(
                        queries[q.qid], limit=max(KS), page_filter=PageFilter(doc_ids=(q.doc_id,))
                    )
                ]
                for q in data.questions
            }
        out[name] = lambda q, found=found: found[q.qid]
    return out


# ---------------------------------------------------------------- report


def evaluate(
    questions: Sequence[Question], ranking: Callable[[Question], Ranking]
) -> dict[str, float]:
    recall = {k: 0.0 for k in KS}
    all_hit = {k: 0.0 for k in KS}
    for q in questions:
        found = ranking(q)
        for k in KS:
            hits = len(q.gold & set(found[:k]))
            recall[k] += hits / len(q.gold)
            all_hit[k] += hits == len(q.gold)
    n = len(questions)
    return {**{f"R@{k}": recall[k] / n for k in KS}, **{f"AH@{k}": all_hit[k] / n for k in KS}}


def table(rows: Sequence[tuple[str, str, int, dict[str, float], float]]) -> str:
    columns = [f"R@{k}" for k in KS] + [f"AH@{k}" for k in KS]
    lines = [
        "| set | variant | questions | " + " | ".join(columns) + " | seconds |",
        "|---|---|---:|" + "---:|" * len(columns) + "---:|",
    ]
    for data, name, n, metrics, seconds in rows:
        values = " | ".join(f"{metrics[c]:.3f}" for c in columns)
        lines.append(f"| {data} | {name} | {n} | {values} | {seconds:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=os.environ.get("DOCMEMO_DATA"))
    parser.add_argument(
        "--encoders",
        default=",".join([*VARIANTS, *STORE_VARIANTS]),
        help=f"comma-separated variants: {', '.join([*VARIANTS, *STORE_VARIANTS])}",
    )
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each set")
    parser.add_argument("--ocr", choices=["auto", "off"], default="auto")
    parser.add_argument(
        "--out", type=Path, default=None, help="also write the table to this Markdown file"
    )
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("--data DIR (or $DOCMEMO_DATA) is required")
    names = [n.strip() for n in args.encoders.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS and n not in STORE_VARIANTS]
    if unknown:
        parser.error(
            f"unknown variants {unknown}; known: {', '.join([*VARIANTS, *STORE_VARIANTS])}"
        )

    from llama_index_docmemo.ingest.ocr import resolve_ocr

    engine = resolve_ocr("auto") if args.ocr == "auto" else None
    ocr = CachedOcr(engine) if engine is not None else None
    rows = []
    for folder in set_folders(Path(args.data)):
        started = time.perf_counter()
        data = load_set(folder, args.limit, ocr)
        pages = sum(len(t) for t in data.texts.values())
        print(
            f"{data.name}: {len(data.questions)} questions, {len(data.texts)} docs, {pages} pages "
            f"(text: ingest.pdf.read_pdf, OCR {'tesseract' if ocr else 'off'}; {time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
        store_names = [n for n in names if n in STORE_VARIANTS]
        for name in names:
            if name in STORE_VARIANTS:
                continue
            started = time.perf_counter()
            metrics = evaluate(data.questions, VARIANTS[name](data))
            rows.append(
                (data.name, name, len(data.questions), metrics, time.perf_counter() - started)
            )
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        if store_names:
            started = time.perf_counter()
            rankings = store_rankings(data, store_names, ocr)
            for name in store_names:
                metrics = evaluate(data.questions, rankings[name])
                rows.append(
                    (data.name, name, len(data.questions), metrics, time.perf_counter() - started)
                )
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    report = table(rows)
    print(report)
    if args.out:
        args.out.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
