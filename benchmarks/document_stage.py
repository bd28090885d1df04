"""What the document stage costs over a collection of 1,000 and 10,000 documents.

A question asked of a whole collection makes the loop's round 1 do more than a page search
(``loop/query.py``, ``_document_stage``): the question's search over the scope goes
``document_search_pages`` deep instead of ``candidates`` (100 pages instead of 30), the schemas
and cards of the documents among those pages are read (one request: each document's card is
stored on its record at ingest, ``store/points.py``), and the cards are matched to the question
(``levers/document_stage.py``). This measures that against the plain round-1 search, through
the package's own store and encoder (Qdrant Edge on disk, the default CPU encoder):

- ``search``: p50 / p95 of the round-1 page search (``RoundLevers.search``, 30 pages);
- ``stage``: p50 / p95 of the document stage (wide search, schemas and cards, scores) on a new
  engine (nothing is kept between questions), and ``added``: the per-query difference to the
  search;
- ``bytes``: the payload the stage reads per query (JSON of the hits, schemas and cards), and
  of the schemas and cards alone;
- ``top1``: how often the named document scores first (a synthetic check of the cards: every
  question names its company and fiscal year, siblings of the same company share names);
- ``card search``: p50 of ``search_cards`` (the 10 best cards for the question: dense and
  BM25 branches over the cards, fused) and how often its first card is the named document.

The collection is synthetic: companies with made-up names, 1-3 filings each (10-K, 10-Q, 8-K of
different years), 2 pages a filing (a cover naming company, form and year; a page of figures).
``--hash-names`` names the files by a hash, so only titles and covers name them.

    python benchmarks/document_stage.py --documents 1000 10000 --queries 60
    python benchmarks/document_stage.py --documents 1000 --hash-names
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.levers.document_stage import card_scores, document_scores, hit_scores
from llama_index_docmemo.levers.rounds import RoundLevers
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.store.factory import open_store
from llama_index_docmemo.store.points import CARD, card_payload
from llama_index_docmemo.store.scope import PageFilter
from llama_index_docmemo.types import PageInput, PageRecord, PageRef

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "xe", "zu", "bra", "qui", "dor", "fen"]
FORMS = [
    ("10-K", "Annual report for the fiscal year ended December 31, {year}"),
    ("10-Q", "Quarterly report for the quarterly period ended June 30, {year}"),
    ("8-K", "Current report dated {year}"),
]


@dataclass(frozen=True)
class Filing:
    doc_id: str
    company: str
    year: int
    form: str


def filings(n_documents: int, hash_names: bool, seed: int = 0) -> list[Filing]:
    """``n_documents`` filings of made-up companies, 1-3 each (siblings share the name)."""
    rng = np.random.default_rng(seed)
    out: list[Filing] = []
    names: set[str] = set()
    ids: set[str] = set()
    while len(out) < n_documents:
        name = "".join(rng.choice(SYLLABLES, size=4)).capitalize()
        if name in names:
            continue
        names.add(name)
        for _ in range(min(int(rng.integers(1, 4)), n_documents - len(out))):
            year, form = int(rng.integers(2015, 2025)), FORMS[int(rng.integers(0, 3))][0]
            stem = f"{name.upper()}_{year}_{form.replace('-', '')}"
            doc_id = (hashlib.sha1(stem.encode()).hexdigest()[:16] if hash_names else stem) + ".pdf"
            if doc_id not in ids:
                ids.add(doc_id)
                out.append(Filing(doc_id, name, year, form))
    return out


def pages_of(filing: Filing) -> list[str]:
    period = dict(FORMS)[filing.form].format(year=filing.year)
    cover = (
        f"UNITED STATES SECURITIES AND EXCHANGE COMMISSION FORM {filing.form} {period} "
        f"{filing.company} Inc. (Exact name of registrant as specified in its charter)"
    )
    figures = (
        f"Consolidated statements of operations. Net sales {filing.year} and {filing.year - 1}. "
        "Operating income, net income, capital expenditures, cash flows from operating activities."
    )
    return [cover, figures]


def build(path: Path, corpus: list[Filing]) -> object:
    encoder = default_encoder()
    store = open_store(path=path, encoder=encoder)
    with store.bulk_load():
        for filing in corpus:
            texts = pages_of(filing)
            refs = [PageRef(filing.doc_id, p) for p in range(1, len(texts) + 1)]
            embeddings = encoder.encode_pages(
                [PageInput(r, t) for r, t in zip(refs, texts, strict=True)]
            )
            version = hashlib.sha256("".join(texts).encode()).hexdigest()
            schema = DocumentSchema(
                doc_id=filing.doc_id,
                doc_version=version,
                n_pages=len(texts),
                title=f"{filing.form} {filing.year} {filing.company} Inc.",
                page_summaries={p: t[:120] for p, t in enumerate(texts, start=1)},
            )
            records = [
                PageRecord(filing.doc_id, version, p, len(texts), t, source=filing.doc_id)
                for p, t in enumerate(texts, start=1)
            ]
            store.upsert_document(schema, records, embeddings)
    return store, encoder


def _json_bytes(values: list[object]) -> int:
    return sum(len(json.dumps(v, default=str)) for v in values)


def measure(store, encoder, corpus: list[Filing], n_queries: int, seed: int = 1) -> dict:  # noqa: ANN001
    """Each question's document stage as the loop runs it on a new engine (nothing is kept
    between questions: the cards are read from the store with the schemas), and the card
    search (``search_cards``, the 10 best cards) beside it."""
    config = DocMemoConfig()
    levers = RoundLevers(store, encoder, config.levers, config.selection)
    scope = PageFilter()
    rng = np.random.default_rng(seed)
    chosen = [corpus[int(i)] for i in rng.choice(len(corpus), size=n_queries, replace=False)]
    depth = run(levers.depth(scope))
    limit = max(config.selection.candidates, config.documents.document_search_pages)
    times: dict[str, list[float]] = {"search": [], "stage": [], "cards": []}
    read, cards_read, top1, card_top1 = [], [], 0, 0
    for filing in chosen:
        question = f"What were {filing.company}'s capital expenditures in FY{filing.year}?"
        embedding = encoder.encode_query(question)
        started = time.perf_counter()
        run(levers.search(embedding, scope, depth))
        times["search"].append(time.perf_counter() - started)
        started = time.perf_counter()
        hits = run(levers.search(embedding, scope, depth, limit))
        docs = tuple(sorted({h.record.doc_id for h in hits}))
        stored = store.list_cards(PageFilter(doc_ids=docs))
        scores = document_scores(
            hit_scores(hits),
            card_scores(question, [s.card for s in stored]),
            config.documents.card_weight,
        )
        times["stage"].append(time.perf_counter() - started)
        started = time.perf_counter()
        best_cards = store.search_cards(embedding, limit=10, page_filter=scope)
        times["cards"].append(time.perf_counter() - started)
        records = [{"schema": s.schema.model_dump(), CARD: card_payload(s.card)} for s in stored]
        read.append(_json_bytes([h.record.__dict__ for h in hits]) + _json_bytes(records))
        cards_read.append(_json_bytes(records))
        top1 += max(scores, key=lambda d: (scores[d], d)) == filing.doc_id
        card_top1 += bool(best_cards) and best_cards[0][0].schema.doc_id == filing.doc_id

    def ms(name: str, q: float) -> float:
        return 1000 * float(np.quantile(times[name], q))

    return {
        "documents": len(corpus),
        "pages": 2 * len(corpus),
        "search_p50_ms": ms("search", 0.5),
        "search_p95_ms": ms("search", 0.95),
        "stage_p50_ms": ms("stage", 0.5),
        "stage_p95_ms": ms("stage", 0.95),
        "added_p50_ms": 1000
        * float(np.median([b - a for a, b in zip(times["search"], times["stage"], strict=True)])),
        "card_search_p50_ms": ms("cards", 0.5),
        "bytes_p50": int(statistics.median(read)),
        "card_bytes_p50": int(statistics.median(cards_read)),
        "top1": top1 / len(chosen),
        "card_search_top1": card_top1 / len(chosen),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--hash-names", action="store_true", help="files named by a hash")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    rows = []
    for n in args.documents:
        corpus = filings(n, args.hash_names)
        with tempfile.TemporaryDirectory(prefix="docmemo-docstage-") as folder:
            started = time.perf_counter()
            store, encoder = build(Path(folder) / "store", corpus)
            built = time.perf_counter() - started
            try:
                row = {**measure(store, encoder, corpus, args.queries), "build_s": built}
            finally:
                store.close()
        rows.append(row)
        print(
            f"{row['documents']:>6} documents ({row['pages']} pages, built in {built:.0f} s): "
            f"search p50 {row['search_p50_ms']:.1f} ms (p95 {row['search_p95_ms']:.1f}); "
            f"document stage p50 {row['stage_p50_ms']:.1f} ms (p95 {row['stage_p95_ms']:.1f}), "
            f"added p50 {row['added_p50_ms']:.1f} ms; read {row['bytes_p50'] / 1024:.0f} KB "
            f"({row['card_bytes_p50'] / 1024:.0f} KB of schemas and cards); "
            f"named document first {100 * row['top1']:.0f}%; card search p50 "
            f"{row['card_search_p50_ms']:.1f} ms, named document first "
            f"{100 * row['card_search_top1']:.0f}%",
            flush=True,
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
