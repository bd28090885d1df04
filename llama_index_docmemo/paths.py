"""Where the package keeps files, and how it writes them.

Files it can rebuild (rendered pages, crops, layouts, the demo) go to the user cache folder of
the platform (``platformdirs``; ``$DOCMEMO_CACHE_DIR`` overrides); the embedded store of an
index built without one (``DocMemoIndex.from_documents``) and of the ``docmemo`` command goes to
the user data folder (``$DOCMEMO_STORE_DIR`` overrides; the variables are read by
``pydantic-settings`` each time a folder is asked for). Every cache file is written through a unique temporary name in its folder and then
renamed into place, so concurrent writers of the same entry never lose it and a reader never
sees half a file.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import platformdirs
from pydantic_settings import BaseSettings, SettingsConfigDict

APP = "llama-index-docmemo"


class FolderEnvironment(BaseSettings):
    """``$DOCMEMO_CACHE_DIR`` and ``$DOCMEMO_STORE_DIR`` (None: unset); ``$DOCMEMO_STORE``, the
    ``docmemo`` command's old store variable, is read only to warn (deprecated in 0.2.0)."""

    model_config = SettingsConfigDict(env_prefix="DOCMEMO_", env_ignore_empty=True, extra="ignore")

    cache_dir: Path | None = None
    store_dir: Path | None = None
    store: Path | None = None


def default_cache_dir() -> Path:
    """``$DOCMEMO_CACHE_DIR``, else the platform's user cache folder for this package."""
    return FolderEnvironment().cache_dir or platformdirs.user_cache_path(APP)


def default_store_dir() -> Path:
    """``$DOCMEMO_STORE_DIR``, else ``store`` in the platform's user data folder: the one
    default store of ``DocMemoIndex`` and of the ``docmemo`` command.

    ``$DOCMEMO_STORE`` still counts when ``$DOCMEMO_STORE_DIR`` is unset, with a
    :class:`DeprecationWarning` (it goes in 0.3.0).
    """
    env = FolderEnvironment()
    if env.store_dir is not None:
        return env.store_dir
    if env.store is not None:
        warnings.warn(
            "$DOCMEMO_STORE is deprecated and goes in 0.3.0: set $DOCMEMO_STORE_DIR instead "
            "(one variable for the store folder of DocMemoIndex and of the docmemo command)",
            DeprecationWarning,
            stacklevel=2,
        )
        return env.store
    return platformdirs.user_data_path(APP) / "store"


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
