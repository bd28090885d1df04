"""The DocMemo loop: one query's state and stop policy (``query.py``, read top to bottom), what
an engine's queries share (``parts.py``), LlamaIndex's events around a round
(``instrumentation.py``) and the result a query returns (``result.py``). Each step is written
once, as steps; ``steps.run`` / ``steps.arun`` drive it with sync or async I/O."""

from llama_index_docmemo.loop.parts import LoopParts, clean_question
from llama_index_docmemo.loop.query import DocMemoLoop, RoundSelection
from llama_index_docmemo.loop.result import NOT_ANSWERABLE, DocMemoResult, crop_view

__all__ = [
    "NOT_ANSWERABLE",
    "DocMemoLoop",
    "DocMemoResult",
    "LoopParts",
    "RoundSelection",
    "clean_question",
    "crop_view",
]
