"""The evaluation harness (``docmemo eval``) and ``docmemo compare``: the ``eval`` extra.

Nothing in the package's core imports this package: ``docmemo`` mounts both commands lazily
(:mod:`.cli`), and engines, retrievers and ``docmemo ask`` never touch it. Its dependencies
(scipy's intervals, matplotlib's plots, LlamaIndex's BM25 retriever over bm25s) come with
``pip install 'llama-index-docmemo[eval]'``.
"""

from __future__ import annotations

from llama_index_docmemo._extras import require

EXTRA_MODULES = ("scipy.stats", "matplotlib", "llama_index.retrievers.bm25", "bm25s")


def require_eval_extra(feature: str) -> None:
    """Raise :class:`~llama_index_docmemo.errors.MissingExtraError` naming the ``eval`` extra
    when one of its modules is missing."""
    for module in EXTRA_MODULES:
        require(module, extra="eval", feature=feature)
