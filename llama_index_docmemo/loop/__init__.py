"""The DocMemo loop, in rooms: the engine's named parts (``runner.py``); a query's state as a
value and the pure rules that advance it (``state.py``: choose, apply, the stop policy, and
over a collection the document layer's); the rounds' I/O between those rules
(``query.py``, read top to bottom); what a round shows the reader (``reading.py``) and the
result a query returns, its answer's citations among it (``result.py``). Each step is written once, as steps;
``step_runtime.run`` / ``step_runtime.arun`` drive it with sync or async I/O."""

from llama_index_docmemo.loop.query import arun_query, first_round, query_steps, run_query
from llama_index_docmemo.loop.reading import crop_view
from llama_index_docmemo.loop.result import DocMemoResult
from llama_index_docmemo.loop.runner import DocMemoRunner
from llama_index_docmemo.loop.state import (
    NOT_ANSWERABLE,
    QueryState,
    RoundSelection,
    apply,
    choose,
    clean_question,
    stop_reason,
)

__all__ = [
    "NOT_ANSWERABLE",
    "DocMemoResult",
    "DocMemoRunner",
    "QueryState",
    "RoundSelection",
    "apply",
    "arun_query",
    "choose",
    "clean_question",
    "crop_view",
    "first_round",
    "query_steps",
    "run_query",
    "stop_reason",
]
