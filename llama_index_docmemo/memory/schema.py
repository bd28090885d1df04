"""Document Schema Memory: query-independent structure of each document (type, sections,
summaries, and the reference graph between its pages).

The schema is built once at ingest, stored with the document, read by every query; the reference
graph is built once per document version from the stored page text, when a query first needs it.
Pure data and pure functions: no I/O.

**Reference graph**: which pages point at which, from page text alone.

A useful page is evidence that the pages it points at are worth reading: the table it cites
("see Table 3"), the note behind a figure ("Note 12"), the page a table continues on. The graph
is query-independent, so it is built once per document version (lazily, from the stored page
text) and read by propagation. Pure functions over strings: no I/O, no model.

Edges (undirected, page numbers 1-based):
- *label references*: a page mentioning "Table 3" / "Figure 4" / "Note 12" / "Exhibit 2" /
  "Appendix B" links to the page(s) whose caption or heading defines that label (a line that
  starts with it), when at most ``max_targets`` pages define it (else the label is ambiguous).
- *continuations*: "(continued)", "cont'd", "continued from previous page" near the top of a
  page links it to the previous page; "continued on next page" near the bottom links it to the
  next one.
- *broken tables*: the last lines of a page and the first lines of the next are both rows of
  numbers (a table or numbered list running over the page break).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from llama_index_docmemo.types import PageRef


class Section(BaseModel):
    """A node of the section tree: a heading and the pages it spans (1-based, inclusive)."""

    title: str
    level: int = 1
    start_page: int
    end_page: int


class DocumentSchema(BaseModel):
    """Structure of one document version.

    Args:
        doc_id: stable document identifier (the file name by default).
        doc_version: sha256 of the file content.
        sections: flattened section tree in reading order (``level`` gives the depth).
        page_sections: page -> title path of its innermost section ("Part II > Item 7").
        page_summaries: page -> short summary (VLM at ingest, else the page's first lines).
        metadata_digest: hash of the app's metadata of its pages ("" for none).
    """

    doc_id: str
    doc_version: str
    source: str = ""
    n_pages: int
    title: str = ""
    doc_type: str = "document"
    tenant: str | None = None
    acl: list[str] = Field(default_factory=list)
    sections: list[Section] = Field(default_factory=list)
    page_sections: dict[int, str] = Field(default_factory=dict)
    page_summaries: dict[int, str] = Field(default_factory=dict)
    summaries_by: str = "first-lines"
    metadata_digest: str = ""

    def section_of(self, page: int) -> str:
        return self.page_sections.get(page, "")

    def summary_of(self, page: int) -> str:
        return self.page_summaries.get(page, "")


class SchemaMemory:
    """The schemas of the documents a query runs over, with the look-ups the loop needs."""

    def __init__(self, schemas: Iterable[DocumentSchema] = ()) -> None:
        self._schemas: dict[str, DocumentSchema] = {s.doc_id: s for s in schemas}

    @property
    def schemas(self) -> Mapping[str, DocumentSchema]:
        return self._schemas

    def add(self, schema: DocumentSchema) -> None:
        self._schemas[schema.doc_id] = schema

    def copy(self) -> SchemaMemory:
        """An independent copy (the schemas themselves are shared: nothing changes them)."""
        return SchemaMemory(self._schemas.values())

    def get(self, doc_id: str) -> DocumentSchema | None:
        return self._schemas.get(doc_id)

    def n_pages(self, doc_id: str) -> int:
        schema = self._schemas.get(doc_id)
        return schema.n_pages if schema else 0

    def section_of(self, ref: PageRef) -> str:
        schema = self._schemas.get(ref.doc_id)
        return schema.section_of(ref.page) if schema else ""

    def summary_of(self, ref: PageRef) -> str:
        schema = self._schemas.get(ref.doc_id)
        return schema.summary_of(ref.page) if schema else ""

    def same_section(self, a: PageRef, b: PageRef) -> bool:
        """True when both pages lie in the same non-empty section of the same document."""
        if a.doc_id != b.doc_id:
            return False
        sa = self.section_of(a)
        return bool(sa) and sa == self.section_of(b)

    def describe(self, max_sections: int = 40) -> str:
        """A compact outline of every document, for prompts and rerankers, in ``doc_id`` order:
        the same text whichever order a query met the documents in (a stable prompt prefix)."""
        lines: list[str] = []
        for _, schema in sorted(self._schemas.items()):
            lines.append(
                f"{schema.doc_id} ({schema.doc_type}, {schema.n_pages} pages): {schema.title}"
            )
            for section in schema.sections[:max_sections]:
                indent = "  " * section.level
                lines.append(
                    f"{indent}{section.title} [pp. {section.start_page}-{section.end_page}]"
                )
        return "\n".join(lines)


# -- the reference graph -------------------------------------------------------------------------

_KINDS = {
    "table": "table",
    "tab": "table",
    "figure": "figure",
    "fig": "figure",
    "chart": "figure",
    "exhibit": "exhibit",
    "note": "note",
    "notes": "note",
    "appendix": "appendix",
    "annex": "appendix",
    "schedule": "schedule",
}
_LABEL_ID = r"(?:\d{1,3}(?:\.\d{1,2})?[a-z]?|[A-H](?![a-z])|[IVX]{1,5}(?![a-z]))"
_MENTION = re.compile(
    r"\b(tables?|tab\.|figures?|figs?\.|charts?|exhibits?|notes?|appendix|annex|schedule)\s+"
    rf"({_LABEL_ID})\b",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"^\s*(table|tab\.|figure|fig\.|chart|exhibit|note|appendix|annex|schedule)\s+"
    rf"({_LABEL_ID})\s*(?:[:.\-\u2013\u2014|)]|$|\s+[A-Z])",
    re.IGNORECASE,
)
_CONTINUED_TOP = re.compile(
    r"\(continued\)|\bcontinued from\b|\bcont['\u2019]d\b|\(cont\.\)|\bcontinued\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_CONTINUED_BOTTOM = re.compile(
    r"\bcontinued on (?:the )?(?:next|following) page\b|\(continued on\b|\bcontinues on\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])[-\u2212(]?\$?\d[\d,]*(?:\.\d+)?%?\)?(?![\w])")
_EDGE_CHARS = 300
_ROW_LINES = 3


def _kind(word: str) -> str:
    """The canonical kind of a label word ("Tables" -> "table", "Fig." -> "figure")."""
    name = word.lower().rstrip(".")
    return _KINDS.get(name) or _KINDS[name[:-1]]


def label_mentions(text: str) -> set[tuple[str, str]]:
    """(kind, id) of every labelled object the text mentions, e.g. ("table", "3")."""
    return {(_kind(m.group(1)), m.group(2).lower()) for m in _MENTION.finditer(text)}


def label_definitions(text: str) -> set[tuple[str, str]]:
    """(kind, id) of the labels a line of the text starts with (a caption or a note heading)."""
    out: set[tuple[str, str]] = set()
    for line in text.splitlines():
        match = _DEFINITION.match(line)
        if match:
            out.add((_kind(match.group(1)), match.group(2).lower()))
    return out


def _numeric_rows(lines: list[str]) -> bool:
    """Whether every one of the lines (at least two) carries two or more numbers: table rows."""
    rows = [line for line in lines if line.strip()]
    return len(rows) >= 2 and all(len(_NUMBER.findall(line)) >= 2 for line in rows)


def continues_next(text: str, next_text: str) -> bool:
    """Whether the page ``next_text`` continues what ``text`` was saying (same table or list)."""
    head = next_text.lstrip()[:_EDGE_CHARS]
    tail = text.rstrip()[-_EDGE_CHARS:]
    if _CONTINUED_TOP.search(head) or _CONTINUED_BOTTOM.search(tail):
        return True
    last = [ln for ln in text.splitlines() if ln.strip()][-_ROW_LINES:]
    first = [ln for ln in next_text.splitlines() if ln.strip()][:_ROW_LINES]
    return _numeric_rows(last) and _numeric_rows(first)


@dataclass
class ReferenceGraph:
    """Undirected page -> {page: kind} links of one document ("label" or "continuation")."""

    links: dict[int, dict[int, str]] = field(default_factory=dict)
    definitions: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def add(self, a: int, b: int, kind: str) -> None:
        if a == b:
            return
        self.links.setdefault(a, {}).setdefault(b, kind)
        self.links.setdefault(b, {}).setdefault(a, kind)

    def defining(self, kind: str, label: str) -> list[int]:
        """Pages whose caption or heading defines the label (e.g. ("figure", "4")), ascending."""
        return list(self.definitions.get((kind, label.lower()), []))

    def linked(self, page: int) -> dict[int, str]:
        """Pages linked to ``page`` with the kind of link (empty when none)."""
        return dict(self.links.get(page, {}))

    def __len__(self) -> int:
        return sum(len(v) for v in self.links.values()) // 2


def build_reference_graph(
    texts: Mapping[int, str], *, max_targets: int = 2, continuations: bool = True
) -> ReferenceGraph:
    """The reference graph of one document from its pages' text (page number -> text)."""
    defined: dict[tuple[str, str], set[int]] = defaultdict(set)
    for page, text in texts.items():
        for label in label_definitions(text):
            defined[label].add(page)
    graph = ReferenceGraph(definitions={k: sorted(v) for k, v in defined.items()})
    for page, text in texts.items():
        for label in label_mentions(text):
            targets = defined.get(label, set())
            if 0 < len(targets) <= max_targets:
                for target in targets:
                    graph.add(page, target, "label")
    if continuations:
        for page, text in texts.items():
            following = texts.get(page + 1)
            if following is not None and continues_next(text, following):
                graph.add(page, page + 1, "continuation")
    return graph
