"""A finished loop's answer with its citations: checked against the pages read, boxed on the page,
abstained from when the evidence is weak, marked with ``[n]`` when asked.

The rules are in :mod:`llama_index_docmemo.evidence`; this module gathers what they read from the
query's snapshot (page texts, crops, notes, beliefs) and makes the one piece of I/O they need (the boxes, on
the CPU executor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.evidence.boxes import BoxRequest, locate_boxes
from llama_index_docmemo.evidence.citations import (
    Citation,
    CropText,
    PageText,
    abstention_reason,
    answer_suffix,
    cite,
    not_found_text,
    with_markers,
)
from llama_index_docmemo.nodes import is_page, node_ref
from llama_index_docmemo.step_runtime import Steps, cpu_call
from llama_index_docmemo.types import EvidenceNote, PageRef

if TYPE_CHECKING:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.loop.state import QueryState

ABSTAINS_FROM = ("answered", "need_more")
"""Statuses the abstention rule applies to: an answer, and the best guess of a loop that ran out
of rounds (an "unanswerable" verdict already is "not found")."""
CANDIDATES = 3
"""Best candidate pages an abstention names."""
OCR_BOX_PAGES = 3
"""OCR'd pages an answer's boxes are looked for on (each is OCR'd again, about half a second): the
answer's figures and names come first, then the quoted facts."""
NODE_KEYS = ("docmemo_quote", "docmemo_quote_start", "docmemo_quote_end", "docmemo_bbox")
"""Source-node metadata keys of the first verified citation of the page (hidden from prompts)."""


@dataclass
class CitedAnswer:
    """The answer as the response gives it, its status, citations and why it abstained (if so)."""

    status: str
    answer: str
    citations: list[Citation] = field(default_factory=list)
    abstained: str | None = None


def page_texts(state: QueryState) -> list[PageText]:
    """Every page read, with its text and the text of its crops."""
    crops: dict[PageRef, list[CropText]] = {}
    for node in state.crops:
        bbox = node.node.metadata.get("bbox")
        if bbox and len(bbox) == 4:
            x0, y0, x1, y1 = (float(v) for v in bbox)
            crop = CropText((x0, y0, x1, y1), node.node.get_content())
            crops.setdefault(node_ref(node), []).append(crop)
    return [
        PageText(ref, rec.text, rec.ocr, tuple(crops.get(ref, ())))
        for ref, rec in state.records.items()
        if ref in state.read
    ]


def boxed_citations(
    answer: str,
    pages: Sequence[PageText],
    notes: Sequence[EvidenceNote],
    evidence: Sequence[PageRef],
    claims: bool,
    sources: Mapping[PageRef, str],
    ocr_pages_max: int = OCR_BOX_PAGES,
) -> list[Citation]:
    """:func:`~llama_index_docmemo.evidence.citations.cite`, then the box of each verified
    citation found in a page's text layer or OCR text (on at most ``ocr_pages_max`` OCR'd pages),
    from its page's PDF (``sources``; a PDF no longer on disk gives no box): CPU work and file
    reads, run on the loop's CPU executor."""
    citations = cite(answer, pages, notes, evidence, claims=claims)
    numbers, requests = [], []
    ocr_pages: set[PageRef] = set()
    for n, c in enumerate(citations):
        ref = c.ref
        source = sources.get(ref) if ref else None
        ocr = c.how == "ocr_text"
        if ocr and ref not in ocr_pages and len(ocr_pages) >= ocr_pages_max:
            continue
        searchable = c.how == "text_layer" or ocr
        if ref and c.verified and searchable and source and Path(source).is_file():
            numbers.append(n)
            if ocr:
                ocr_pages.add(ref)
            requests.append(BoxRequest(source, ref.page, c.stated, c.quote, ocr=ocr))
    boxes = locate_boxes(requests) if requests else []
    for n, request, box in zip(numbers, requests, boxes, strict=True):
        if box is not None:
            found = "ocr_words" if request.ocr else "search_for"
            citations[n] = citations[n].model_copy(update={"bbox": box, "box_from": found})
    return citations


def cited_answer(
    state: QueryState,
    config: DocMemoConfig,
    status: str,
    answer: str,
    evidence: Sequence[PageRef],
    beliefs: Mapping[PageRef, float],
) -> Steps[CitedAnswer]:
    """Steps: the citations of the loop's answer (claims only for an answer the reader stands
    by) with their boxes, the abstention rule of ``config.answer`` applied (to
    ``ABSTAINS_FROM``), and the unverified suffix of an answer that stands."""
    sources = {ref: rec.source for ref, rec in state.records.items() if ref in state.read}
    citations = yield cpu_call(
        boxed_citations,
        answer,
        page_texts(state),
        state.episodic.evidence,
        list(evidence),
        status == "answered",
        sources,
        OCR_BOX_PAGES if config.answer.ocr_boxes else 0,
    )
    if status not in ABSTAINS_FROM:
        return CitedAnswer(status, answer, citations)
    settings = config.answer
    reason = abstention_reason(
        settings.abstain, citations, evidence, beliefs, settings.abstain_min_belief
    )
    if reason is None:
        suffix = answer_suffix(citations) if status == "answered" else ""
        return CitedAnswer(status, answer + suffix, citations)
    ranked = sorted(beliefs.items(), key=lambda item: -item[1])
    pool = [(r, b) for r, b in ranked if r in set(evidence)] or [
        (r, b) for r, b in ranked if r in state.read
    ]
    return CitedAnswer("unanswerable", not_found_text(reason, pool[:CANDIDATES]), citations, reason)


def mark_sources(
    cited: CitedAnswer, sources: Sequence[NodeWithScore], markers: bool
) -> CitedAnswer:
    """Each page node gets its first verified citation's quote, offsets and box (``NODE_KEYS``);
    with ``markers`` the answer gets ``[n]`` for the page nodes' order."""
    first: dict[PageRef, Citation] = {}
    for c in cited.citations:
        if c.verified and c.ref is not None:
            first.setdefault(c.ref, c)
    for node in sources:
        citation = first.get(node_ref(node)) if is_page(node) else None
        if citation is None:
            continue
        values = (citation.quote, citation.start, citation.end, citation.bbox)
        node.node.metadata.update(dict(zip(NODE_KEYS, values, strict=True)))
        for keys in (node.node.excluded_llm_metadata_keys, node.node.excluded_embed_metadata_keys):
            keys.extend(k for k in NODE_KEYS if k not in keys)
    if markers and cited.abstained is None and cited.status == "answered":
        order = [node_ref(n) for n in sources]
        cited.answer = with_markers(cited.answer, cited.citations, order)
    return cited
