"""Deprecated: the 0.2 home of the readers, now :mod:`llama_index_docmemo.readers` (it goes in 0.4.0).

The 0.2 names still import, from here, from ``reasoning.base``, ``reasoning.vlm`` and
``reasoning.offline`` (aliases of this module) and from the package, each use with a
:class:`DeprecationWarning`: ``Reasoner`` is :class:`~llama_index_docmemo.Reader`,
``ReasoningInput`` :class:`~llama_index_docmemo.ReaderInput`, ``OfflineReasoner``
:class:`~llama_index_docmemo.OfflineReader`, ``VLMReasoner`` :class:`~llama_index_docmemo.VLMReader`;
the other names of those modules keep their names under ``llama_index_docmemo.readers``.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

RENAMED = {
    "Reasoner": "Reader",
    "ReasoningInput": "ReaderInput",
    "OfflineReasoner": "OfflineReader",
    "VLMReasoner": "VLMReader",
}
"""0.2 name -> name."""
MODULES = ("base", "vlm", "offline")
"""The 0.2 submodules that still import (as this module), and where a name is looked up."""

for _old in MODULES:
    sys.modules[f"{__name__}.{_old}"] = sys.modules[__name__]


def moved(name: str, stacklevel: int = 2) -> Any:
    """The object the 0.2 name ``name`` stands for, with a DeprecationWarning (``stacklevel``
    counted from the caller of this function)."""
    new = RENAMED.get(name, name)
    for module in MODULES:
        found = getattr(importlib.import_module(f"llama_index_docmemo.readers.{module}"), new, None)
        if found is not None:
            warnings.warn(
                f"llama_index_docmemo.reasoning.{name} is deprecated: use "
                f"llama_index_docmemo.readers.{module}.{new} (the 0.2 name goes in 0.4.0)",
                DeprecationWarning,
                stacklevel=stacklevel + 1,
            )
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return moved(name)
