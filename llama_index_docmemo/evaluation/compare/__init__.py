"""``docmemo compare``: DocMemo against stock LlamaIndex engines on a pilot's own PDFs and questions.

``compare(docs, questions, out, llm=...)`` (:func:`.run.compare`) answers every question with every
engine through the same LlamaIndex LLM, counts each answer's cost from LlamaIndex's instrumentation
(:func:`llama_index_docmemo.events.counting_llm_calls`), gives it citations checked against the
pages it cited or read by one rule for every engine (:mod:`.citing`), judges it with LlamaIndex's
evaluators (:mod:`.verdicts`), and writes ``report.html``, ``report.md``, ``report.json`` and
``results.jsonl``.
"""

from llama_index_docmemo.evaluation.compare.questions import Question, load_questions
from llama_index_docmemo.evaluation.compare.run import compare

__all__ = ["Question", "compare", "load_questions"]
