"""Where the package keeps files, and how it writes them.

Files it can rebuild (rendered pages, crops, layouts, the demo) go to the user cache folder of
the platform (``platformdirs``; ``$DOCMEMO_CACHE_DIR`` overrides); an index built without a
store (``DocMemoIndex.from_documents``) goes to the user data folder (``$DOCMEMO_STORE_DIR``
overrides). Every cache file is written through a unique temporary name in its folder and then
renamed into place, so concurrent writers of the same entry never lose it and a reader never
sees half a file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import platformdirs

APP = "llama-index-docmemo"
CACHE_ENV = "DOCMEMO_CACHE_DIR"
STORE_ENV = "DOCMEMO_STORE_DIR"


def default_cache_dir() -> Path:
    """``$DOCMEMO_CACHE_DIR``, else the platform's user cache folder for this package."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else platformdirs.user_cache_path(APP)


def default_store_dir() -> Path:
    """``$DOCMEMO_STORE_DIR``, else ``store`` in the platform's user data folder."""
    env = os.environ.get(STORE_ENV)
    return Path(env) if env else platformdirs.user_data_path(APP) / "store"


def write_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """``write(temporary path)``, then the file renamed to ``path`` in one step.

    The temporary name is unique (``tempfile``), so two writers of one entry each rename a
    complete file of their own and the entry is never lost; a failed write leaves no file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
