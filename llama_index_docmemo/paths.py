"""Where the package keeps files it can rebuild (rendered pages, crops, layouts, the demo)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "DOCMEMO_CACHE"


def default_cache_dir() -> Path:
    """``$DOCMEMO_CACHE``, else ``~/.cache/llama-index-docmemo``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "llama-index-docmemo"
