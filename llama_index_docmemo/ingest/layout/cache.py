"""On-disk store of a document's layout blocks, one JSON file per document version.

Layout detection costs about a second a page (MinerU or PyMuPDF's model); the blocks of a given file version never
change, so they are computed once (at ``docmemo index --layout ...`` or on the first query that reads the page) and
read back by every later query.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from filelock import FileLock
from pydantic import TypeAdapter

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.ingest.layout.blocks import LayoutBlock
from llama_index_docmemo.paths import write_atomically

_BLOCKS = TypeAdapter(list[LayoutBlock])
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class LayoutCache:
    """Blocks per page of each document version under ``root`` (``<root>/<doc_version>.json``).

    A page present in the file with an empty list was analysed and has no blocks; an absent page was never analysed.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path_for(self, doc_version: str) -> Path:
        if not doc_version:
            raise ValueError("doc_version must be a non-empty string (the file's content hash)")
        return self.root / f"{_SAFE.sub('_', doc_version)}.json"

    def load(self, doc_version: str) -> dict[int, list[LayoutBlock]]:
        """Every analysed page of a version (empty when none is stored)."""
        path = self.path_for(doc_version)
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return {
                int(page): _BLOCKS.validate_python(blocks) for page, blocks in data["pages"].items()
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise IngestError(
                str(path), f"corrupt layout cache (delete it to recompute): {exc}"
            ) from exc

    def get(self, doc_version: str, page: int) -> list[LayoutBlock] | None:
        """Blocks of one page, or None when that page was never analysed."""
        return self.load(doc_version).get(page)

    def save(self, doc_version: str, pages: dict[int, list[LayoutBlock]], source: str = "") -> Path:
        """Merge ``pages`` into the stored version (new pages win) and write it atomically."""
        path = self.path_for(doc_version)
        path.parent.mkdir(parents=True, exist_ok=True)
        # load, merge and write under a lock: two writers (threads or processes) of one
        # version each add their pages; the rename alone would keep only the last writer's
        with FileLock(str(path) + ".lock", timeout=60):
            merged = self.load(doc_version)
            merged.update(pages)
            payload = {
                "doc_version": doc_version,
                "source": source,
                "pages": {
                    str(p): [b.model_dump(mode="json") for b in merged[p]] for p in sorted(merged)
                },
            }
            text = json.dumps(payload)
            write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        return path
