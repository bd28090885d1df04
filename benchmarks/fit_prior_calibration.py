"""Fit ``DocMemoConfig.prior_calibration`` on the tuning half: P(gold | first-round score, rank).

Runs the question's first-round search (the ranking every engine's round 1 reads) for each
answerable question of the tuning half, labels each candidate gold or not, and fits the logistic
model of :func:`llama_index_docmemo.levers.priors.fit_calibration`. Gold labels are used here,
offline, only to fit three coefficients; no engine sees them.

    python benchmarks/fit_prior_calibration.py --data ../shared/data/mmlongbench-doc --store STORE
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.evaluation.datasets import load_dataset, select_split
from llama_index_docmemo.evaluation.setup import open_eval_store
from llama_index_docmemo.levers.priors import fit_calibration
from llama_index_docmemo.memory.belief import normalise_scores
from llama_index_docmemo.types import PageFilter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="dataset folder (qa.jsonl, pdfs/)")
    parser.add_argument("--store", type=Path, required=True, help="page store holding its PDFs")
    parser.add_argument("--split", default="tune", choices=("tune",), help="only the tuning half")
    args = parser.parse_args()
    config = DocMemoConfig()
    dataset = select_split(load_dataset(args.data), args.split)
    store, encoder = open_eval_store(args.store)
    scores: list[list[float]] = []
    labels: list[list[bool]] = []
    try:
        for item in dataset:
            if not item.scored_on_pages:
                continue
            hits = store.search(
                encoder.encode_query(item.question),
                limit=config.candidates,
                page_filter=PageFilter(doc_ids=(item.doc,)),
                prefetch_limit=config.prefetch,
            )
            hits.sort(key=lambda h: (-h.score, h.record.doc_id, h.record.page))
            scores.append([float(c) for c in normalise_scores([h.score for h in hits])])
            labels.append([h.ref in item.gold for h in hits])
    finally:
        store.close()
    coefficients = fit_calibration(scores, labels)
    print(json.dumps({"prior_calibration": list(coefficients), "questions": len(scores)}))


if __name__ == "__main__":
    main()
