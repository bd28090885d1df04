"""The exchange (prompt -> request -> parsed reply) is one neutral module, ``llms/exchange.py``,
used by the reader (``readers/``) and the indexer's page summaries (``ingest/``): neither
folder imports the other (their subfolders included), and no module of ``llms/`` imports either.

Every import counts, the ones inside functions and under ``TYPE_CHECKING`` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llama_index_docmemo"


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; the package uses no relative imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: relative import"
            found.add(node.module or "")
    return found


@pytest.mark.parametrize(
    ("files", "forbidden"),
    [
        ("ingest/**/*.py", ("readers",)),
        ("readers/**/*.py", ("ingest",)),
        ("llms/**/*.py", ("readers", "ingest")),
    ],
)
def test_no_import_between_the_reader_and_ingest(files: str, forbidden: tuple[str, ...]) -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted(PACKAGE.glob(files))
        for name in sorted(imported(path))
        if any(name.startswith(f"llama_index_docmemo.{folder}") for folder in forbidden)
    ]
    assert offenders == []
