"""The DocMemo loop: one query's state and stop policy (``query.py``, read top to bottom), what
an engine's queries share (``parts.py``), LlamaIndex's events around a round
(``instrumentation.py``), what a round shows the reader (``reading.py``) and the result a query
returns (``result.py``), both from the typed, frozen state the loop hands them (``snapshot.py``).
Each step is written once, as steps; ``step_runtime.run`` / ``step_runtime.arun`` drive it with
sync or async I/O."""

from llama_index_docmemo.loop.parts import LoopParts, clean_question
from llama_index_docmemo.loop.query import DocMemoLoop
from llama_index_docmemo.loop.result import NOT_ANSWERABLE, DocMemoResult, crop_view
from llama_index_docmemo.loop.snapshot import QuerySnapshot, RoundSelection

__all__ = [
    "NOT_ANSWERABLE",
    "DocMemoLoop",
    "DocMemoResult",
    "LoopParts",
    "QuerySnapshot",
    "RoundSelection",
    "clean_question",
    "crop_view",
]
