"""LlamaIndex ``Document``s from llama-index-readers-file's PDF readers -> parsed documents.

``PyMuPDFReader`` gives one Document per page with ``file_path``, ``total_pages`` and ``source`` (the
1-based page number as a string); ``PDFReader`` gives ``file_name`` and ``page_label`` (the printed label,
which may be "iv"), and ``SimpleDirectoryReader`` adds ``file_path``. Documents are grouped by file, pages
numbered from ``source``/``page_number``/``page`` when every Document has one, else by their order.
When the file is a readable PDF it also supplies the outline, page sizes, the content hash and OCR text
for pages the reader left empty (and the pages themselves when the reader gave the file as one text);
otherwise the version is a hash of the page texts, and one long text without pages (a Markdown or
Word file from ``SimpleDirectoryReader``) is cut into pages of about 3,000 characters. A Document
that names no file (``Document(text=...)``) is a document of its own, under its ``doc_id``.
Without ``file_path`` (a ``file_metadata=`` that returns only the app's keys) the file is found from
the ids the Documents carry (``SimpleDirectoryReader(filename_as_id=True)``); failing that, pages
that show several files of one name are refused (:class:`DocumentIdentityError`), never merged.
The Documents' metadata goes with their pages (:func:`~llama_index_docmemo.store.metadata.user_metadata`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index_docmemo.errors import DocumentIdentityError, IngestError
from llama_index_docmemo.ingest.files import regular_file_problem
from llama_index_docmemo.ingest.ocr import MIN_TEXT_CHARS, OcrEngine, alnum_count
from llama_index_docmemo.ingest.parsed import ParsedDocument, ParsedPage
from llama_index_docmemo.ingest.pdf import RENDER_ERRORS, open_pdf, read_pdf
from llama_index_docmemo.store.metadata import user_metadata

if TYPE_CHECKING:
    from llama_index.core.schema import Document

_PAGE_KEYS = ("source", "page_number", "page")

PAGE_CHARS = 3000
"""About one printed page: the size of the pages a long text without pages is cut into."""


_READER_PART = re.compile(r"^(?P<path>.+)_part_\d+$")
"""``SimpleDirectoryReader(filename_as_id=True)``'s id of the n-th Document of a file."""


def _carried_path(document: Document, name: str) -> str:
    """The path of the Document's file when its ids carry one (``SimpleDirectoryReader``'s
    ``filename_as_id`` ids, a ``ref_doc_id`` that is a path) and it ends with ``name``; else ""."""
    for carried in (document.doc_id, document.ref_doc_id or ""):
        match = _READER_PART.match(carried)
        for path in (match["path"] if match else "", carried):
            if path and Path(path).name == name and os.path.isfile(path):
                return path
    return ""


def document_file(document: Document) -> tuple[str, str]:
    """(name, source) of a Document: its file name and path, from the reader's ``file_path``,
    else from the ids it carries (:func:`_carried_path`); the name alone when neither says where
    the file is; for a Document that names no file, its own id (``Document.doc_id``) twice."""
    meta = document.metadata
    path = str(meta.get("file_path") or "")
    name = str(meta.get("file_name") or (Path(path).name if path else ""))
    if not name:
        return document.doc_id, document.doc_id
    return name, path or _carried_path(document, name) or name


def names_file(document: Document) -> bool:
    return bool(document.metadata.get("file_path") or document.metadata.get("file_name"))


def located(document: Document) -> bool:
    """Whether the Document says where its file is (not only its name)."""
    name, source = document_file(document)
    return names_file(document) and source != name or bool(document.metadata.get("file_path"))


def _page_number(document: Document) -> int | None:
    for key in _PAGE_KEYS:
        value = document.metadata.get(key)
        if isinstance(value, int) and value >= 1:
            return value
        if isinstance(value, str) and value.strip().isdigit() and int(value) >= 1:
            return int(value)
    return None


def _page_numbers(documents: Sequence[Document]) -> list[int]:
    """Each Document's page: its own number when every Document has one, else its position."""
    numbers = [_page_number(d) for d in documents]
    if any(n is None for n in numbers):
        return list(range(1, len(documents) + 1))
    return numbers  # type: ignore[return-value]


def _page_texts(documents: Sequence[Document]) -> dict[int, str]:
    """Page -> text; Documents of one page (a reader that split it) are joined in order."""
    texts: dict[int, list[str]] = {}
    for number, document in zip(_page_numbers(documents), documents, strict=True):
        texts.setdefault(number, []).append(document.get_content())
    return {page: "\n".join(parts).strip() for page, parts in sorted(texts.items())}


def _metadata(
    source: str, documents: Sequence[Document]
) -> tuple[dict[str, Any], dict[int, dict[str, Any]], list[str]]:
    """The app's metadata of a group: the keys every Document shares, each page's other keys
    (from its first Document), and what was left out (named once for the file)."""
    kept: list[dict[str, Any]] = []
    problems: dict[str, None] = {}
    for document in documents:
        values, left_out = user_metadata(document.metadata)
        kept.append(values)
        problems.update(dict.fromkeys(left_out))
    shared = {
        key: value
        for key, value in kept[0].items()
        if all(key in other and other[key] == value for other in kept[1:])
    }
    pages: dict[int, dict[str, Any]] = {}
    for number, values in zip(_page_numbers(documents), kept, strict=True):
        own = {key: value for key, value in values.items() if key not in shared}
        if own:
            pages.setdefault(number, own)
    return shared, pages, [f"{source}: {problem}" for problem in problems]


def _text_version(texts: dict[int, str]) -> str:
    digest = hashlib.sha256()
    for page, text in texts.items():
        digest.update(f"{page}\x00{text}\x00".encode())
    return digest.hexdigest()


def split_pages(text: str, size: int = PAGE_CHARS) -> dict[int, str]:
    """A long text without pages (a Markdown or Word file) cut into pages of about ``size``
    characters at paragraph, else line, else word boundaries, so that retrieval and reading
    work page by page as they do for a PDF."""
    pages: list[str] = []
    rest = text.strip()
    while len(rest) > size:
        head = rest[: size + size // 2]
        cut = next(
            (i for sep in ("\n\n", "\n", " ") if (i := head.rfind(sep, size // 2)) > 0),
            size,
        )
        pages.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    pages.append(rest)
    return {n: page for n, page in enumerate(pages, start=1)}


def _numbers_given(documents: Sequence[Document]) -> list[int]:
    """The page numbers the Documents state (``source``, ``page_number``, ``page``, or a
    numeric ``page_label``)."""
    numbers = []
    for document in documents:
        label = str(document.metadata.get("page_label") or "").strip()
        number = _page_number(document) or (int(label) if label.isdigit() else None)
        if number is not None:
            numbers.append(number)
    return numbers


def is_page_document(document: Document) -> bool:
    """A Document of one page of a file (a PDF reader's: it states its page number)."""
    return bool(_numbers_given([document]))


def _check_one_file(name: str, documents: Sequence[Document]) -> None:
    """Raise DocumentIdentityError when Documents that name the file ``name`` but not where it
    is come back to a page after others (1, 2, 3, 1, 2) or disagree on the page count: they come
    from several files of that name, which one document would merge. A page repeated in a row is
    one page a reader split."""
    numbers = _numbers_given(documents)
    totals = {d.metadata["total_pages"] for d in documents if "total_pages" in d.metadata}
    runs = [n for i, n in enumerate(numbers) if i == 0 or n != numbers[i - 1]]
    repeated = sorted({n for n in runs if runs.count(n) > 1})
    if not repeated and len(totals) <= 1:
        return
    why = (
        f"page {repeated[0]} comes {runs.count(repeated[0])} times"
        if repeated
        else f"they count {sorted(totals)} pages"
    )
    raise DocumentIdentityError(
        f"{len(documents)} Documents name the file {name!r} but not its folder, and {why}: "
        f"they come from several files named {name!r}, which would be merged into one document. "
        "Keep file_path in their metadata (SimpleDirectoryReader(file_metadata=lambda p: "
        "{**default_file_metadata_func(p), ...}) adds your keys to the reader's), or read them "
        "with SimpleDirectoryReader(filename_as_id=True); nothing was indexed"
    )


def _unpaged(documents: Sequence[Document]) -> bool:
    """One Document with no page number: a reader that gave the whole file as one text."""
    return len(documents) == 1 and _page_number(documents[0]) is None


def _parse_group(
    doc_id: str, source: str, documents: Sequence[Document], ocr: OcrEngine | None
) -> ParsedDocument:
    texts = _page_texts(documents)
    shared, page_metadata, warnings = _metadata(source, documents)
    from_file: ParsedDocument | None = None
    if source.lower().endswith(".pdf") and not any(map(located, documents)):
        warnings.append(
            f"{source}: indexed from the reader's text only, without page images, outline or "
            "OCR: its Documents carry no file_path (keep it in file_metadata=, or read with "
            "SimpleDirectoryReader(filename_as_id=True)); queries read its pages as text"
        )
    elif source.lower().endswith(".pdf") and os.path.isfile(source):
        try:
            from_file = read_pdf(source, doc_id=doc_id, ocr=ocr)
        except (IngestError, OSError, *RENDER_ERRORS) as exc:
            # the reader managed where MuPDF did not: keep the reader's text, and say so
            reason = exc.reason if isinstance(exc, IngestError) else str(exc)
            warnings.append(
                f"{source}: indexed from the reader's text only, without page images, outline "
                f"or OCR: MuPDF cannot read the file ({reason})"
            )
    if _unpaged(documents):
        if from_file is not None and from_file.n_pages > 1:  # its pages come from the file
            texts = {p.page: p.text for p in from_file.pages}
        elif from_file is None and len(texts[1]) > PAGE_CHARS * 3 // 2:
            texts = split_pages(texts[1])
    total = max(
        [max(texts)]
        + [
            d.metadata["total_pages"]
            for d in documents
            if isinstance(d.metadata.get("total_pages"), int)
        ]
    )
    file_pages = {p.page: p for p in from_file.pages} if from_file else {}
    pages: list[ParsedPage] = []
    for number, text in texts.items():
        page = ParsedPage(page=number, text=text, metadata=page_metadata.get(number, {}))
        known = file_pages.get(number)
        if known is not None:
            page.width, page.height = known.width, known.height
            if alnum_count(text) < MIN_TEXT_CHARS and (known.ocr or known.unread):
                page.text, page.ocr, page.unread = known.text, known.ocr, known.unread
        elif not alnum_count(text):
            page.unread = True
        pages.append(page)
    return ParsedDocument(
        doc_id=doc_id,
        doc_version=from_file.doc_version if from_file else _text_version(texts),
        source=source,
        n_pages=max(total, from_file.n_pages if from_file else 0),
        pages=pages,
        title_hint=from_file.title_hint if from_file else "",
        toc=from_file.toc if from_file else [],
        lines=from_file.lines if from_file else [],
        metadata=shared,
        warnings=warnings,
    )


def _doc_ids(
    sources: Sequence[str], root: str | os.PathLike[str] | None, own_ids: set[str]
) -> dict[str, str]:
    """Doc id of each source: its path relative to ``root`` (default: the sources' common
    folder) for files that exist ("" for a file outside ``root``), a Document's own id for
    ``own_ids``, else the name it was given."""
    files = [s for s in sources if os.path.isfile(s) and s not in own_ids]
    if root is not None:
        common = os.path.abspath(root)
    else:
        dirs = [os.path.dirname(os.path.abspath(f)) for f in files]
        common = os.path.commonpath(dirs) if dirs else ""
    ids = {s: s if s in own_ids else Path(s).name for s in sources}
    for file in files:
        relative = os.path.relpath(os.path.abspath(file), common)
        ids[file] = "" if relative.startswith(os.pardir) else Path(relative).as_posix()
    return ids


def outside_root(source: str, root: str | os.PathLike[str] | None) -> IngestError:
    return IngestError(
        os.path.abspath(source),
        f"is not inside {os.path.abspath(root or '.')}, which document ids are relative to: "
        "build the index with a root= that holds every file (or index it with its own doc id)",
    )


def parse_documents(
    documents: Sequence[Document],
    *,
    ocr: OcrEngine | None = None,
    root: str | os.PathLike[str] | None = None,
) -> tuple[list[ParsedDocument], list[IngestError]]:
    """Group Documents by file (a Document naming no file stands alone) and read each group.

    Doc ids are paths relative to ``root``, by default the files' common folder (:func:`_doc_ids`),
    or the Document's own id; a file outside ``root`` fails, named. Sources of files that exist
    are stored as absolute paths, so pages render from any working directory.
    """
    named = [(document_file(document)[1], document) for document in documents]
    # a Document that names no file, or only a file's name: not a path to look for on disk
    own_ids = {source for source, document in named if not located(document)}
    for name in {source for source, document in named if names_file(document)} & own_ids:
        _check_one_file(name, [d for source, d in named if source == name])
    ids = _doc_ids(list(dict.fromkeys(source for source, _ in named)), root, own_ids)
    groups: dict[str, tuple[str, list[Document]]] = {}
    failures: list[IngestError] = []
    for source, document in named:
        if not ids[source]:
            if not any(f.path == os.path.abspath(source) for f in failures):
                failures.append(outside_root(source, root))
            continue
        absolute = (
            os.path.abspath(source) if source not in own_ids and os.path.isfile(source) else source
        )
        groups.setdefault(ids[source], (absolute, []))[1].append(document)
    parsed: list[ParsedDocument] = []
    for doc_id, (source, group) in groups.items():
        try:
            parsed.append(_parse_group(doc_id, source, group, ocr))
        except IngestError as exc:
            failures.append(exc)
    return parsed, failures


def skipped_neighbours(documents: Sequence[Document]) -> list[IngestError]:
    """PDFs beside the Documents' files that no Document came from and that do not open: what a
    reader skipped (``SimpleDirectoryReader`` prints the error and goes on). A PDF that opens
    was left out on purpose (``required_exts``, ``exclude``) and is not named."""
    sources = {
        os.path.abspath(path)
        for d in documents
        if (path := str(d.metadata.get("file_path") or "")) and os.path.isfile(path)
    }
    failures: list[IngestError] = []
    for folder in sorted({os.path.dirname(source) for source in sources}):
        for entry in sorted(Path(folder).iterdir()):
            if (
                entry.suffix.lower() != ".pdf"
                or str(entry) in sources
                or regular_file_problem(entry, follow=False) is not None
            ):
                continue
            try:
                open_pdf(entry).close()
            except IngestError as exc:
                reason = f"no Document came from it (the reader skipped it): {exc.reason}"
                failures.append(IngestError(str(entry), reason))
    return failures
