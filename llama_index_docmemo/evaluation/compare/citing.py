"""Each engine's answer with its citations, checked by one rule for every engine.

DocMemo's citations are its response's (``metadata["docmemo"]["citations"]``: the figures, names
and quoted facts of its answer checked against the pages it read, boxed on the page). A stock
engine's answer gets the same from the same library code
(:func:`~llama_index_docmemo.loop.result.boxed_citations`) over the pages its source nodes came
from, their text as the page store keeps it (OCR text included), boxes from the page by
``search_for`` (from the OCR words where DocMemo's ``ocr_boxes`` is on). So does a best guess
DocMemo did not stand by (status ``need_more``: the loop cites no claim of it), so that no engine's
figures escape the check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llama_index_docmemo.evaluation.compare.engines import EngineReply
from llama_index_docmemo.evidence.citations import Citation, PageText
from llama_index_docmemo.loop.result import boxed_citations
from llama_index_docmemo.types import PageRef


def answer_citations(
    reply: EngineReply,
    pages: Sequence[PageText],
    sources: Mapping[PageRef, str],
    ocr_pages_max: int,
) -> list[Citation]:
    """The citations of ``reply``: DocMemo's own, or its claims checked against ``pages`` (the
    pages it cited or read) with ``sources`` (each page's PDF) and the cited pages searched
    first; ``ocr_pages_max`` OCR'd pages get boxes from their OCR words."""
    own = list(reply.trace.citations) if reply.trace is not None else []
    if reply.trace is not None and reply.trace.status != "need_more":
        return own
    claims = boxed_citations(reply.answer, pages, [], reply.cited, True, sources, ocr_pages_max)
    return claims + own
