"""Deterministic search across processes: fresh processes open the same Qdrant Edge store (one after
the other) and must return the same rankings and the same scores, bit for bit.

The store is built by ``tests/test_eval_search_determinism.py``'s ``fill``: text-less pages (one shared
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

pytestmark = pytest.mark.slow  # a subprocess per test

SCRIPT = """
import json, sys
from test_eval_search_determinism import DIM, QUERY, fill
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.store.scope import PageFilter

path, build = sys.argv[1], sys.argv[2] == "build"
store = EdgePageStore(path, encoder_name="test", dim=DIM, sparse=True)
if build:
    fill(store)
out = []
for scope in (None, PageFilter(doc_ids=("d2.pdf",))):
    for _ in range(3):
        hits = store.search(QUERY, limit=30, page_filter=scope)
        out.append([[h.record.doc_id, h.record.page, h.score] for h in hits])
store.close()
print(json.dumps(out))
"""


def searches_in_new_process(path: Path, *, build: bool) -> list[list[list[object]]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
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
