"""Document Schema Memory: query-independent structure of each document (type, sections, summaries).

Built once at ingest, stored with the document, read by every query. Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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
