"""Every public name resolves, and importing the package pulls in no optional backend."""

from __future__ import annotations

import subprocess
import sys

import pytest

import llama_index_docmemo


@pytest.mark.parametrize("name", llama_index_docmemo.__all__)
def test_public_name_resolves(name: str) -> None:
    assert getattr(llama_index_docmemo, name) is not None


@pytest.mark.slow
def test_import_is_light() -> None:
    code = (
        "import sys, llama_index_docmemo as m; m.DocMemoQueryEngine; m.ColQwenEncoder; "
        "print(int('torch' in sys.modules), int('colpali_engine' in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0"]


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        llama_index_docmemo.Nope  # noqa: B018
