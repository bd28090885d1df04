"""What a query returns: its answer with the answer's citations, the evidence nodes and the trace.

The answer's citations are checked against the pages read, boxed on the PDF page, abstained from
when the evidence is weak and marked with ``[n]`` when asked. The rules are in
:mod:`llama_index_docmemo.evidence` (pure); this module gathers what they read from the query's
snapshot (page texts, crops, notes, beliefs) and makes the one piece of I/O they need: a
citation's box on its page, from the PDF's text layer (PyMuPDF ``search_for``) or from the OCR
word boxes of a page without one, on the loop's CPU executor.

A figure's box is the place where the page writes it (``stated``), inside its quote's box when
the page writes the figure several times; a fact's box covers its quote (the union of the quote's
line boxes). Boxes are in PDF points, [x0, y0, x1, y1] with the origin at the top left (PyMuPDF's,
and the crops'). A page read by OCR is OCR'd again for its word boxes (Tesseract inside MuPDF,
about half a second a page; only pages with a verified citation): without Tesseract its
citations have no box.

Evidence pages may carry their rendered image (for an app to show): the same file the reader was
shown, rendered once per document version and page (``page_images.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pymupdf
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_docmemo.errors import DocMemoError
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
from llama_index_docmemo.ingest.ocr import OcrUnavailableError, TesseractOcr
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, open_pdf
from llama_index_docmemo.loop.reading import page_image
from llama_index_docmemo.nodes import PageWithScore, is_page, node_ref, page_node
from llama_index_docmemo.page_images import page_image_files
from llama_index_docmemo.step_runtime import Steps, cpu_call
from llama_index_docmemo.trace import (
    BeliefState,
    DocumentBelief,
    FeedbackRecord,
    PageRead,
    PageScore,
    QueryTrace,
    RoundTrace,
)
from llama_index_docmemo.types import EvidenceNote, Feedback, PageRef

if TYPE_CHECKING:
    from llama_index_docmemo.config import DocMemoConfig
    from llama_index_docmemo.events import LLMCallTally
    from llama_index_docmemo.loop.runner import DocMemoRunner
    from llama_index_docmemo.loop.state import QueryState, RoundSelection
    from llama_index_docmemo.memory.belief import PageBeliefMemory

logger = logging.getLogger(__name__)

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
_SEARCH_CHARS = 80
_TESSERACT = threading.Lock()
"""MuPDF will not run Tesseract from two threads of one process (ingest/ocr.py): one at a time."""


@dataclass
class DocMemoResult:
    """The outcome of one question: answer, verdict, evidence nodes and the full trace."""

    answer: str
    status: str
    source_nodes: list[NodeWithScore]
    trace: QueryTrace

    def to_response(self) -> Response:
        return Response(
            response=self.answer,
            source_nodes=self.source_nodes,
            metadata={"docmemo": self.trace.model_dump(mode="json")},
        )


def evidence_refs(
    useful: Sequence[PageRef], cited: Sequence[PageRef], read: set[PageRef]
) -> list[PageRef]:
    """Evidence pages: judged useful or cited by a note, and read (never a page merely read)."""
    return [r for r in dict.fromkeys([*useful, *cited]) if r in read]


def build_result(
    state: QueryState, runner: DocMemoRunner, status: str, answer: str, seconds: float
) -> Steps[DocMemoResult]:
    """The answer, the evidence nodes (with their page images when asked for) and the trace of
    a finished query (``state``, with its verdict, after ``seconds``): built here and only
    here."""
    episodic = state.episodic
    cited = [n.page for n in episodic.evidence]
    refs = evidence_refs(episodic.useful_pages, cited, state.read)
    records = [state.records[r] for r in refs if r in state.records]
    images: dict[PageRef, Path | None] = {}
    cache = runner.cache_dir
    if runner.evidence_images and cache is not None and records:
        files = yield from page_image_files([page_image(r, cache) for r in records])
        images = {r.ref: path for r, path in zip(records, files, strict=True)}
    beliefs = state.beliefs
    belief_of = {
        ref: float(beliefs.mean([ref])[0]) if ref in beliefs else 0.5 for ref in state.read
    }
    cited = yield from cited_answer(state, runner.config, status, answer, refs, belief_of)
    status, answer = cited.status, cited.answer
    evidence = sorted(
        (
            PageWithScore(
                node=page_node(rec, image_path=images.get(rec.ref)),
                score=belief_of.get(rec.ref, 0.5),
            )
            for rec in records
        ),
        key=lambda n: -(n.score or 0.0),
    )
    useful = set(episodic.useful_pages)
    sources = evidence + [c for c in state.crops if node_ref(c) in useful]
    cited = mark_sources(cited, sources, runner.config.answer.citation_markers)
    answer = cited.answer
    if not sources and state.error is not None:  # cut short: what round 1 would have read
        sources = unread_candidates(state)
    reader = runner.reader
    decide = getattr(reader, "images_now", None)  # after a refusal a server gets text
    choice = decide() if callable(decide) else None
    trace = QueryTrace(
        question=state.question,
        answer=answer,
        status=status,
        stop_reason=state.stop or "max_rounds",
        error=state.error,
        rounds=list(state.rounds),
        pages_read=[
            PageRead(doc_id=r.doc_id, page=r.page, round=episodic.round_of(r) or 0)
            for r in episodic.pages_read
        ],
        evidence=[
            PageScore(
                doc_id=str(n.node.metadata["doc_id"]),
                page=int(n.node.metadata["page"]),
                score=n.score or 0.0,
            )
            for n in sources
            if is_page(n) and not n.node.metadata.get("unread")
        ],
        citations=cited.citations,
        abstained=cited.abstained,
        llm_calls=state.llm_calls,
        seconds=seconds,
        reader=reader.name if reader is not None else "",
        images=images_shown(state, bool(choice.send) if choice is not None else False),
        images_reason=images_reason(state, choice.reason if choice is not None else ""),
    )
    return DocMemoResult(answer=answer, status=status, source_nodes=sources, trace=trace)


def _fileless(state: QueryState) -> list[str]:
    """The documents of the pages read that have no file to render (indexed from text alone)."""
    records = [state.records[r] for r in state.read if r in state.records]
    if not records or any(Path(r.source).is_file() for r in records):
        return []
    return sorted({r.doc_id for r in records})


def images_shown(state: QueryState, chosen: bool) -> bool:
    """Whether the reader was shown page images: chosen, and a page read had a file."""
    return chosen and not _fileless(state)


def images_reason(state: QueryState, chosen: str) -> str:
    """Why (not) images: the reader's choice, or the pages read having no file."""
    fileless = _fileless(state)
    if not fileless:
        return chosen
    return (
        f"no page images: {', '.join(fileless)} were indexed without their PDF file (their "
        "Documents carried no file_path), so their pages were read as text"
    )


def unread_candidates(state: QueryState) -> list[NodeWithScore]:
    """Round 1's chosen pages, best first, marked ``unread`` in their metadata: what a query
    cut by its deadline or its LLM's failure before any evidence still gives an app to show."""
    if not state.rounds:
        return []
    nodes = []
    for chosen in sorted(state.rounds[0].selected, key=lambda s: -s.score):
        record = state.records.get(PageRef(chosen.doc_id, chosen.page))
        if record is not None:
            node = page_node(record)
            node.metadata["unread"] = True
            nodes.append(PageWithScore(node=node, score=chosen.score))
    return nodes


def round_trace(
    selection: RoundSelection,
    feedback: Feedback | None,
    dropped: int,
    beliefs: PageBeliefMemory,
    crops: int,
    cost: LLMCallTally,
    documents: list[DocumentBelief] | None = None,
) -> RoundTrace:
    """What a round retrieved, read, learned and cost (``cost``), and the ``beliefs`` it left
    (``documents``: the document beliefs, over a scope of several); ``crops``: the crops shown
    so far."""
    record = FeedbackRecord.of(feedback, dropped) if feedback is not None else None
    watched = dict.fromkeys(
        [r.ref for r in selection.pages]
        + [PageRef(c.doc_id, c.page) for c in selection.candidates]
        + beliefs.informed_refs()
    )
    return RoundTrace(
        round=selection.round,
        query=selection.query,
        lam=selection.lam,
        candidates=selection.candidates,
        selected=[
            PageScore(doc_id=r.doc_id, page=r.page, score=s)
            for r, s in zip(selection.pages, selection.scores, strict=True)
        ],
        crops=crops,
        feedback=record,
        beliefs=belief_states(beliefs, list(watched)),
        documents=documents or [],
        llm_calls=cost.calls,
        images=cost.images,
        image_tokens=cost.image_tokens,
        prompt_tokens=cost.prompt_tokens,
        completion_tokens=cost.completion_tokens,
        seconds=selection.seconds,
    )


def belief_states(beliefs: PageBeliefMemory, refs: list[PageRef]) -> list[BeliefState]:
    """(alpha, beta) of the pages of ``refs`` that hold a belief of their own."""
    out = []
    for ref in refs:
        if ref in beliefs:
            a, b = beliefs.get(ref)
            out.append(BeliefState(doc_id=ref.doc_id, page=ref.page, alpha=a, beta=b))
    return out


# -- the answer's citations ----------------------------------------------------------------


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


# -- a citation's box on its page --------------------------------------------------------------


@dataclass(frozen=True)
class BoxRequest:
    """Find ``stated`` (inside ``quote`` when given) on page ``page`` (1-based) of ``source``."""

    source: str
    page: int
    stated: str
    quote: str = ""
    ocr: bool = False  # search the page's OCR words, not its text layer


def _search(page: pymupdf.Page, text: str, textpage: pymupdf.TextPage | None) -> list[pymupdf.Rect]:
    """The line boxes of ``text`` on the page (a long text by its first words when whole fails)."""
    text = " ".join(text.split())
    if not text:
        return []
    hits = page.search_for(text, textpage=textpage)
    if not hits and len(text) > _SEARCH_CHARS:
        hits = page.search_for(text[:_SEARCH_CHARS].rsplit(" ", 1)[0], textpage=textpage)
    return list(hits)


def _union(rects: Sequence[pymupdf.Rect]) -> pymupdf.Rect:
    box = pymupdf.Rect(rects[0])
    for rect in rects[1:]:
        box |= rect
    return box


def box_on_page(
    page: pymupdf.Page, request: BoxRequest, textpage: pymupdf.TextPage | None = None
) -> list[float] | None:
    """The box of one request on an open page (in ``textpage``, its OCR words, when given), or
    None when the page's text does not hold it."""
    quote_rects = _search(page, request.quote, textpage) if request.quote else []
    if request.stated == request.quote:
        return _rounded(_union(quote_rects)) if quote_rects else None
    hits = _search(page, request.stated, textpage)
    if not hits:
        return None
    inside = [h for q in quote_rects for h in hits if q.intersects(h)]
    return _rounded((inside or hits)[0])


def _rounded(rect: pymupdf.Rect) -> list[float]:
    return [round(v, 2) for v in (rect.x0, rect.y0, rect.x1, rect.y1)]


def locate_boxes(requests: Sequence[BoxRequest]) -> list[list[float] | None]:
    """The box of each request (None where the page cannot be opened or does not hold it); each
    PDF is opened once, each OCR'd page OCR'd once."""
    out: list[list[float] | None] = [None] * len(requests)
    by_source: dict[str, list[int]] = {}
    for n, request in enumerate(requests):
        by_source.setdefault(request.source, []).append(n)
    ocr = _ocr_engine() if any(r.ocr for r in requests) else None
    for source, numbers in by_source.items():
        try:
            with open_pdf(source) as pdf:
                # an OCR text layer refers to its page object weakly: the pages are kept open
                pages: dict[int, pymupdf.Page] = {}
                textpages: dict[int, pymupdf.TextPage] = {}
                for n in numbers:
                    request = requests[n]
                    if not 1 <= request.page <= pdf.page_count or (request.ocr and ocr is None):
                        continue
                    if request.page not in pages:
                        pages[request.page] = pdf[request.page - 1]
                    page = pages[request.page]
                    textpage = None
                    if request.ocr and ocr is not None:
                        if request.page not in textpages:
                            with _TESSERACT:
                                textpages[request.page] = ocr.textpage(page)
                        textpage = textpages[request.page]
                    out[n] = box_on_page(page, request, textpage)
        except (DocMemoError, OSError, ValueError, *RENDER_ERRORS) as exc:
            logger.warning("no citation boxes from %s: %s", source, exc)
    return out


def _ocr_engine() -> TesseractOcr | None:
    """Tesseract for the OCR word boxes, or None (logged) when its language data is missing."""
    try:
        return TesseractOcr()
    except OcrUnavailableError as exc:
        logger.warning("no boxes on OCR'd pages: %s", exc)
        return None
