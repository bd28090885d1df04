"""Deterministic search across processes: fresh processes open the same Qdrant Edge store (one after
the other) and must return the same rankings and the same scores, bit for bit.

The store is built like ``tests/test_eval_search_determinism.py``'s: text-less pages (one shared
dense vector, no lexical terms) and lexical weights that tie, the cases Qdrant orders by chance.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("qdrant_edge")

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
import numpy as np
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.types import PageEmbedding, PageFilter, PageRecord, SparseVector

DIM = 8
path, build = sys.argv[1], sys.argv[2] == "build"
store = EdgePageStore(path, encoder_name="test", dim=DIM, sparse=True)
if build:
    for index in range(3):
        rng = np.random.default_rng(index)
        doc = f"d{index}.pdf"
        records, embeddings = [], []
        for page in range(1, 41):
            textless = page % 3 == 0
            records.append(PageRecord(doc, "v1", page, 40, "" if textless else "t", "src"))
            if textless:
                ones = np.ones((1, DIM), np.float32)
                embeddings.append(PageEmbedding(ones, ones[0], SparseVector((), ())))
            else:
                multi = rng.normal(size=(3, DIM)).astype(np.float32)
                terms = tuple(sorted(int(t) for t in rng.choice(12, 3, replace=False)))
                embeddings.append(PageEmbedding(multi, multi.mean(0), SparseVector(terms, (1.0,) * 3)))
        store.upsert_document(DocumentSchema(doc_id=doc, doc_version="v1", n_pages=40), records, embeddings)
query = PageEmbedding(np.ones((2, DIM), np.float32), np.ones(DIM, np.float32),
                      SparseVector((1, 2, 3), (1.0, 1.0, 1.0)))
out = []
for scope in (None, PageFilter(doc_ids=("d2.pdf",))):
    for _ in range(3):
        hits = store.search(query, limit=30, page_filter=scope)
        out.append([[h.record.doc_id, h.record.page, h.score] for h in hits])
store.close()
print(json.dumps(out))
"""


def searches_in_new_process(path: Path, *, build: bool) -> list[list[list[object]]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), "build" if build else "open"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_processes_rank_identically(tmp_path: Path) -> None:
    path = tmp_path / "store"
    built = searches_in_new_process(path, build=True)
    first = searches_in_new_process(path, build=False)
    second = searches_in_new_process(path, build=False)
    assert first == second == built
    whole, one_doc = first[:3], first[3:]
    assert all(run == whole[0] for run in whole) and all(run == one_doc[0] for run in one_doc)
    assert len(whole[0]) == 30 and any(page % 3 == 0 for _, page, _ in whole[0])
    assert {doc for doc, _, _ in one_doc[0]} == {"d2.pdf"}
