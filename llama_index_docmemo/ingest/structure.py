"""Document Schema Memory from a parsed document: sections, page -> section paths, summaries, type, title.

Pure functions over :mod:`parsed` data. The section tree comes from the PDF outline when there is one, else
from headings detected by font size and weight; summaries are the first meaningful lines of each page unless
the indexer's summarizer (a VLM) replaces them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence, Set
from statistics import median

from llama_index_docmemo.ingest.ocr import alnum_count
from llama_index_docmemo.ingest.parsed import ParsedDocument, TextLine, TocEntry
from llama_index_docmemo.memory.schema import DocumentSchema, Section

MAX_TITLE_CHARS = 120
MAX_LEVELS = 3
HEADING_SIZE_RATIO = 1.15
BOILERPLATE_SHARE = 0.3
SUMMARY_CHARS = 240

_STAMP = re.compile(r"^(arxiv:|doi:|https?://)", re.IGNORECASE)
_CAPTION = re.compile(r"^(fig\.?|figure|table|tab\.|source|note|notes)\b", re.IGNORECASE)
_FILE_NAME = re.compile(r"\.(pdf|docx?|pptx?|indd|xlsx?|qxd|rtf|txt)$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[^\W\d_]{3,}")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _norm(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.lower().split()))


def boilerplate_lines(page_texts: Sequence[str], edge_lines: int = 3) -> set[str]:
    """Normalised running headers/footers: edge lines repeated on at least 30% of pages (3 or more)."""
    if len(page_texts) < 3:
        return set()
    counts: Counter[str] = Counter()
    for text in page_texts:
        lines = [ln for ln in (s.strip() for s in text.splitlines()) if ln]
        counts.update({_norm(ln) for ln in lines[:edge_lines] + lines[-edge_lines:]})
    floor = max(3, BOILERPLATE_SHARE * len(page_texts))
    return {line for line, n in counts.items() if n >= floor}


def meaningful_lines(text: str, boilerplate: Set[str] = frozenset()) -> list[str]:
    """Lines of a page minus page numbers, specks and running headers/footers."""
    lines = (" ".join(s.split()) for s in text.splitlines())
    return [ln for ln in lines if alnum_count(ln) >= 3 and _norm(ln) not in boilerplate]


def first_lines_summary(
    text: str, boilerplate: Set[str] = frozenset(), max_chars: int = SUMMARY_CHARS
) -> str:
    """The page's first meaningful lines, joined with " | ", at most ``max_chars`` long."""
    picked: list[str] = []
    length = 0
    for line in meaningful_lines(text, boilerplate):
        picked.append(line)
        length += len(line) + 3
        if length >= max_chars * 2 // 3:
            break
    return _clip(" | ".join(picked), max_chars)


def sections_from_entries(entries: Sequence[TocEntry], n_pages: int) -> list[Section]:
    """Sections in reading order; each ends where the next one of its level or above begins."""
    sections: list[Section] = []
    for i, entry in enumerate(entries):
        end = n_pages
        for later in entries[i + 1 :]:
            if later.level <= entry.level:
                end = max(entry.page, later.page - 1)
                break
        sections.append(
            Section(
                title=_clip(entry.title, MAX_TITLE_CHARS),
                level=entry.level,
                start_page=entry.page,
                end_page=min(end, n_pages),
            )
        )
    return sections


def page_section_paths(sections: Sequence[Section], n_pages: int) -> dict[int, str]:
    """Page -> "Outer > Inner" title path of the sections open at that page (pages before any: absent)."""
    paths: dict[int, str] = {}
    stack: list[Section] = []
    index = 0
    for page in range(1, n_pages + 1):
        while index < len(sections) and sections[index].start_page <= page:
            section = sections[index]
            while stack and stack[-1].level >= section.level:
                stack.pop()
            stack.append(section)
            index += 1
        while stack and stack[-1].end_page < page:
            stack.pop()
        if stack:
            paths[page] = " > ".join(s.title for s in stack)
    return paths


def _body_size(lines: Iterable[TextLine]) -> float:
    weights: Counter[float] = Counter()
    for line in lines:
        weights[line.size] += len(line.text)
    return weights.most_common(1)[0][0] if weights else 0.0


def _looks_like_heading(text: str) -> bool:
    words = text.split()
    return (
        alnum_count(text) >= 2
        and len(text) <= MAX_TITLE_CHARS
        and len(words) <= 14
        and any(c.isalpha() for c in text)
        and not text[0].islower()
        and not text.endswith((",", ";"))
        and not _CAPTION.match(text)
    )


def detect_headings(
    lines: Sequence[TextLine], n_pages: int, boilerplate: Set[str] = frozenset()
) -> list[TocEntry]:
    """Headings from font runs: lines larger than body text (or bold at body size), ranked into levels.

    Wrapped headings (consecutive lines of one style on a page) are joined; the document title (the one
    largest line of page 1) is left out; the deepest levels are dropped while headings outnumber twice
    the pages, which keeps slide bullets and brochure call-outs out of the tree.
    """
    body = _body_size(lines)
    if not body:
        return []
    runs: list[tuple[TextLine, list[str]]] = []
    previous: TextLine | None = None
    for line in lines:
        larger = line.size >= body * HEADING_SIZE_RATIO
        is_candidate = (larger or (line.bold and line.size >= body)) and _norm(
            line.text
        ) not in boilerplate
        if not is_candidate:
            previous = None
            continue
        if (
            previous is not None
            and runs
            and previous.page == line.page
            and (previous.size, previous.bold) == (line.size, line.bold)
            and len(runs[-1][1]) < 3
        ):
            runs[-1][1].append(line.text)
        else:
            runs.append((line, [line.text]))
        previous = line
    heads = [
        (first, " ".join(parts)) for first, parts in runs if _looks_like_heading(" ".join(parts))
    ]
    if not heads:
        return []
    sizes = Counter(first.size for first, _ in heads)
    top = max(sizes)
    if sizes[top] == 1 and heads[0][0].page == 1 and heads[0][0].size == top:
        heads = heads[1:]
    larger_sizes = sorted(
        {f.size for f, _ in heads if f.size >= body * HEADING_SIZE_RATIO}, reverse=True
    )
    rank = {size: i + 1 for i, size in enumerate(larger_sizes)}
    bold_level = len(larger_sizes) + 1
    entries = [
        TocEntry(level=rank.get(first.size, bold_level), title=text, page=first.page)
        for first, text in heads
    ]
    max_level = min(MAX_LEVELS, max((e.level for e in entries), default=0))
    entries = [e for e in entries if e.level <= max_level]
    while max_level > 1 and len(entries) > max(2 * n_pages, 8):
        max_level -= 1
        entries = [e for e in entries if e.level <= max_level]
    return entries


def guess_title(parsed: ParsedDocument, boilerplate: Set[str] = frozenset()) -> str:
    """Metadata title when it is a real one, else the largest text of page 1, else its first line."""
    hint = parsed.title_hint.removeprefix("Microsoft Word - ").strip()
    if (
        _WORD.search(hint)
        and " " in hint
        and not _FILE_NAME.search(hint)
        and hint.lower() != "untitled"
    ):
        return _clip(hint, MAX_TITLE_CHARS)
    first = [
        ln
        for ln in parsed.lines
        if ln.page == 1 and alnum_count(ln.text) >= 3 and not _STAMP.match(ln.text)
    ]
    if first:
        top = max(ln.size for ln in first)
        big = [ln.text for ln in first if ln.size == top][:3]
        return _clip(" ".join(big), MAX_TITLE_CHARS)
    for page in parsed.pages[:1]:
        lines = meaningful_lines(page.text, boilerplate)
        if lines:
            return _clip(lines[0], MAX_TITLE_CHARS)
    return parsed.doc_id.rsplit(".", 1)[0]


_TYPE_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("10-K", re.compile(r"\bform\s+10-k\b")),
    ("10-Q", re.compile(r"\bform\s+10-q\b")),
    ("8-K", re.compile(r"\bform\s+8-k\b")),
)
_PAPER = re.compile(r"\babstract\b")
_PAPER_BODY = re.compile(r"\b(introduction|related work|arxiv|proceedings of)\b")
_MANUAL = re.compile(
    r"\b(user manual|user guide|user's guide|owner's manual|instruction manual|operating instructions"
    r"|quick start guide|online help|getting started)\b"
)
_ANNUAL = re.compile(r"\bannual report\b")
_FINANCIAL = re.compile(r"\b(balance sheets?|statements? of (cash flows|income|operations))\b")
_REPORT = re.compile(r"\b(report|survey|research center|findings)\b")


def guess_doc_type(parsed: ParsedDocument, title: str) -> str:
    """A coarse document type from cheap cues (cover text, page shape, words per page)."""
    front = " ".join([title, *(p.text for p in parsed.pages[:3])]).lower()
    for name, pattern in _TYPE_CUES:
        if pattern.search(front):
            return name
    if _PAPER.search(front) and _PAPER_BODY.search(front):
        return "paper"
    pages = parsed.pages
    if pages:
        landscape = sum(p.width > p.height for p in pages) / len(pages)
        words = median(len(p.text.split()) for p in pages)
        if landscape >= 0.6 and words < 120:
            return "slides"
    if _MANUAL.search(front):
        return "manual"
    if _ANNUAL.search(front):
        return "annual report"
    if sum(bool(_FINANCIAL.search(p.text.lower())) for p in pages) >= 2:
        return "financial report"
    if _REPORT.search(front):
        return "report"
    return "document"


def build_schema(
    parsed: ParsedDocument, *, tenant: str | None = None, acl: Sequence[str] = ()
) -> DocumentSchema:
    """The schema memory of one document, with first-line page summaries.

    Args:
        parsed: the document as read.
        tenant / acl: access fields stored with the schema.
    """
    texts = [p.text for p in parsed.pages]
    boilerplate = boilerplate_lines(texts)
    entries = parsed.toc or detect_headings(parsed.lines, parsed.n_pages, boilerplate)
    sections = sections_from_entries(entries, parsed.n_pages)
    summaries = {p.page: first_lines_summary(p.text, boilerplate) for p in parsed.pages}
    title = guess_title(parsed, boilerplate)
    return DocumentSchema(
        doc_id=parsed.doc_id,
        doc_version=parsed.doc_version,
        source=parsed.source,
        n_pages=parsed.n_pages,
        title=title,
        doc_type=guess_doc_type(parsed, title),
        tenant=tenant,
        acl=list(acl),
        sections=sections,
        page_sections=page_section_paths(sections, parsed.n_pages),
        page_summaries={page: s for page, s in summaries.items() if s},
        summaries_by="first-lines",
    )
