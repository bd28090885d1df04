"""Shared pytest fixtures: where the real evaluation data lives (never inside this repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _data_root() -> Path | None:
    value = os.environ.get("DOCMEMO_DATA")
    if not value:
        return None
    path = Path(value)
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Root of the evaluation data (holds mmlongbench-doc/ and financebench/), from $DOCMEMO_DATA."""
    root = _data_root()
    if root is None:
        pytest.skip("evaluation data absent: set DOCMEMO_DATA to the folder holding mmlongbench-doc/")
    return root


@pytest.fixture(scope="session")
def mmlongbench_dir(data_root: Path) -> Path:
    path = data_root / "mmlongbench-doc"
    if not (path / "qa.jsonl").is_file():
        pytest.skip(f"{path}/qa.jsonl absent: MMLongBench-Doc dev set not found under DOCMEMO_DATA")
    return path


@pytest.fixture(autouse=True, scope="session")
def _cache_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Rendered pages, crops and layouts go to a temporary folder, never the user's cache."""
    patch = pytest.MonkeyPatch()
    patch.setenv("DOCMEMO_CACHE_DIR", str(tmp_path_factory.mktemp("docmemo-cache")))
    yield
    patch.undo()
