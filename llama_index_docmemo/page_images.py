"""Page images on disk: rendered once per document version, page and size, then read by path.

The reader, the reranker and the evidence nodes show page images; rendering a page costs tens
to hundreds of milliseconds and PyMuPDF holds the GIL meanwhile, so a page is rendered once into
the cache folder (written atomically: concurrent queries never lose or half-read one) and every
later round and query reads the file. An image block that names a file also keeps LlamaIndex's
prompt formatting cheap (no base64 text to scan).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from llama_index_docmemo.errors import IngestError
from llama_index_docmemo.paths import write_atomically
from llama_index_docmemo.step_runtime import Steps, cpu_call

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageImage:
    """Where one page's image lives: the PDF, its version and page, the long side in pixels."""

    source: str
    doc_version: str
    page: int
    side: int
    cache_dir: Path

    @property
    def path(self) -> Path:
        version = "".join(c if c.isalnum() else "_" for c in self.doc_version[:16])
        return self.cache_dir / "pages" / f"{version}-p{self.page}-{self.side}.png"

    @property
    def renderable(self) -> bool:
        return bool(self.source) and Path(self.source).is_file()


def render_page_image(image: PageImage) -> Path | None:
    """The page's PNG file, rendered now if missing (blocking); None when it cannot be
    rendered (the page keeps its text)."""
    path = image.path
    if path.is_file():
        return path
    from llama_index_docmemo.ingest.pdf import render_page

    try:
        rendered = render_page(image.source, image.page, image.side)
    except IngestError as exc:
        logger.warning("no image of %s page %d: %s", image.source, image.page, exc)
        return None
    write_atomically(path, lambda tmp: rendered.save(tmp, format="PNG"))
    return path


def page_image_files(images: list[PageImage]) -> Steps[list[Path | None]]:
    """Steps: the files of ``images``, rendering those not cached yet (inline from the sync
    driver, on the engine's CPU executor from the async one)."""
    out: list[Path | None] = [i.path if i.path.is_file() else None for i in images]
    missing = [n for n, i in enumerate(images) if out[n] is None and i.renderable]
    if missing:
        rendered = yield cpu_call(render_page_images, [images[n] for n in missing])
        for n, path in zip(missing, rendered, strict=True):
            out[n] = path
    return out


def render_page_images(images: list[PageImage]) -> list[Path | None]:
    """:func:`render_page_image` of each (one executor round trip for a round's pages)."""
    return [render_page_image(image) for image in images]
