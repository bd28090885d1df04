"""The package files one offline query runs, and the files between the engine and the store.

The demo report (``docmemo demo``'s 24 pages) is indexed into an embedded Qdrant Edge store with
the default CPU encoder; :class:`~llama_index_docmemo.DocMemoQueryEngine` with the offline reader
answers one demo question once to warm up, then again under a profile hook (``sys.setprofile``,
every thread). Three counts (issue 44):

- **query**: the package modules whose code ran during one ``engine.query``;
- **retrieve**: the same for one ``retriever.retrieve`` (round 1 only);
- **store path**: reaching the store and back. There: the modules on the logical stack (read as
  :mod:`request_path` reads it: a step suspended in the steps runtime counts as the caller of the
  call it yielded) at each call from the package into the backend (``qdrant_edge`` /
  ``qdrant_client``) during a store ``search``; back: every package module whose code ran in
  that search after the backend's last reply (the reply turned into hits). The steps runtime
  (``step_runtime``) is counted, as the issue counted it;
- **store helpers**: every package module whose code ran inside a store ``search``.

Usage: PYTHONPATH=<checkout> python benchmarks/query_files.py [--list] [--question N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from qdrant_edge import EdgeShard  # noqa: E402
from request_path import PACKAGE, PathRecorder  # noqa: E402

BACKENDS = ("qdrant_edge", "qdrant_client")


class FileRecorder(PathRecorder):
    """Records the package modules that ran, and the store path of each store search."""

    def __init__(self, search_codes: frozenset[Any]) -> None:
        super().__init__()
        self.search_codes = search_codes
        self.modules: set[str] = set()
        self.store_paths: list[set[str]] = []
        self.store_helpers: list[set[str]] = []
        self.store_returns: list[set[str]] = []  # modules run since the backend's last reply
        self._inside: FrameType | None = None  # the search running (one at a time, any thread)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code in self.search_codes:
            if self._inside is frame:
                self._inside = None
            return
        inside = self._inside is not None
        if event == "c_call" and inside and isinstance(getattr(arg, "__self__", None), EdgeShard):
            self._backend_called(frame)  # Qdrant Edge: a compiled extension
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if name.startswith(BACKENDS) and inside and frame.f_back is not None:
            self._backend_called(frame.f_back)  # qdrant-client: Python
        if not name.startswith(f"{PACKAGE}."):
            super().__call__(frame, event, arg)  # threads, work items, tasks: their origins
            return
        self.modules.add(name)
        if inside:
            self.store_helpers[-1].add(name)
            self.store_returns[-1].add(name)
        elif frame.f_code in self.search_codes:
            self._inside = frame
            self.store_paths.append(set())
            self.store_helpers.append({name})
            self.store_returns.append(set())
        super().__call__(frame, event, arg)

    def _backend_called(self, caller: FrameType) -> None:
        if caller.f_globals.get("__name__", "").startswith(PACKAGE):
            self.store_paths[-1].update(self.logical_stack(caller))
            self.store_returns[-1] = set()


def recorded(fn: Any, search_codes: frozenset[Any]) -> FileRecorder:
    """``fn()`` run under a :class:`FileRecorder` (every thread)."""
    recorder = FileRecorder(search_codes)
    threading.setprofile(recorder)
    sys.setprofile(recorder)
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return recorder


def measure(question: int = 0) -> dict[str, list[str]]:
    """The modules of one warmed offline query, one retrieve, and its store searches' path and
    helpers (each the union over the query's searches)."""
    from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf
    from llama_index_docmemo.demo.run import DEMO_CONFIG
    from llama_index_docmemo.encoders.factory import default_encoder
    from llama_index_docmemo.indexing.indexer import DocumentIndexer
    from llama_index_docmemo.query_engine import DocMemoQueryEngine
    from llama_index_docmemo.readers.offline import OfflineReader
    from llama_index_docmemo.store.factory import open_store

    text = DEMO_QUESTIONS[question].question
    with tempfile.TemporaryDirectory() as tmp:
        pdf = write_demo_pdf(Path(tmp) / "report.pdf")
        encoder = default_encoder()
        with open_store(Path(tmp) / "store", encoder=encoder) as store:
            DocumentIndexer(store, encoder, ocr=False).index_paths([pdf])
            engine = DocMemoQueryEngine.from_defaults(
                store=store, encoder=encoder, reader=OfflineReader(), config=DEMO_CONFIG
            )
            engine.query(text)  # warm: imports, caches, the encoder's first call
            searches = frozenset({type(store).search.__code__})
            query = recorded(lambda: engine.query(text), searches)
            retriever = engine.retriever
            retrieve = recorded(lambda: retriever.retrieve(text), searches)
    return {
        "query": sorted(query.modules),
        "retrieve": sorted(retrieve.modules),
        "store path": sorted(set().union(*query.store_paths, *query.store_returns)),
        "store helpers": sorted(set().union(*query.store_helpers)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--question", type=int, default=0, help="which demo question (0-2)")
    parser.add_argument("--list", action="store_true", help="list the modules of each count")
    args = parser.parse_args()
    for what, modules in measure(args.question).items():
        print(f"{what}: {len(modules)} package files")
        if args.list:
            print("\n".join(f"  {m}" for m in modules))


if __name__ == "__main__":
    main()
