"""Reference graph of a document (schema memory): which pages point at which, from page text alone.

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
from collections.abc import Mapping
from dataclasses import dataclass, field

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
