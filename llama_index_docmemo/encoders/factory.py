"""Encoders by name: the default CPU encoder, and the one a store was filled with."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.encoders.wordllama import WordLlamaEncoder

DEFAULT_ENCODER = "wordllama-l2-256-w24+bm25"

_WORDLLAMA = re.compile(r"wordllama-l2-(?P<dim>\d+)-w(?P<window>\d+)(?P<bm25>\+bm25)?")


def default_encoder() -> WordLlamaEncoder:
    """The CPU encoder chosen by ``benchmarks/retrieval_recall.py``; loads from its wheel only."""
    return WordLlamaEncoder()


def load_encoder(name: str, settings: Mapping[str, Any] | None = None) -> PageEncoder:
    """The encoder whose :attr:`PageEncoder.name` is ``name``, built with ``settings`` (its
    :meth:`PageEncoder.settings`, as a page store records both).

    ``colqwen2.5:<folder or hub id>`` (or ``colqwen:<...>``) builds a :class:`ColQwenEncoder`
    (extra ``colqwen``) from the recorded model folder, else from the name; a bare
    ``colqwen2.5:<folder name>`` is resolved through ``$DOCMEMO_COLQWEN_PATH`` when that names
    the model folder.

    Raises:
        ValueError: ``name`` is not an encoder this package can rebuild.
    """
    settings = dict(settings or {})
    family, _, source = name.partition(":")
    if family in ("colqwen", "colqwen2.5") and source:
        from llama_index_docmemo.encoders.colqwen import ColQwenEncoder

        local = os.environ.get("DOCMEMO_COLQWEN_PATH")
        recorded = settings.pop("model_name_or_path", None)
        if local and Path(local).name == source:
            return ColQwenEncoder(local, name=name, **settings)
        return ColQwenEncoder(recorded or source, name=name, **settings)
    match = _WORDLLAMA.fullmatch(name)
    if match is None:
        raise ValueError(
            f"unknown encoder name {name!r}: this package rebuilds "
            f"'wordllama-l2-<dim>-w<window>[+bm25]' and 'colqwen2.5:<model folder or hub id>' "
            f"(the default is {DEFAULT_ENCODER!r}); for another encoder pass encoder= (the "
            "encoder object the store was filled with)"
        )
    options = {"dim": int(match["dim"]), "window": int(match["window"])}
    return WordLlamaEncoder(**{**options, "lexical": match["bm25"] is not None, **settings})
