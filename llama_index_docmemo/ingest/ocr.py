"""OCR for pages without a text layer (scanned slide decks), on the CPU with nothing downloaded at run time.

Tesseract runs inside MuPDF (``page.get_textpage_ocr``), so only its language data is needed: the Debian
package ``tesseract-ocr-eng`` (pulled in by ``tesseract-ocr``), Homebrew's ``tesseract``, or any folder named by
``TESSDATA_PREFIX``. Measured on the dev slide decks it reads a page in about 0.5 s at 200 dpi, some ten times
faster than rapidocr-onnxruntime, whose output also ran words together.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Literal, Protocol, runtime_checkable

import pymupdf

from llama_index_docmemo.errors import DocMemoError

logger = logging.getLogger(__name__)

OcrMode = Literal["auto", "on", "off"] | bool

MIN_TEXT_CHARS = 20
"""A page whose text layer has fewer letters/digits than this counts as having none."""

MIN_IMAGE_COVER = 0.2
"""Share of the page that images must cover for a text-less page to be worth OCR."""

_TESSDATA_GLOBS = (
    "/usr/share/tesseract-ocr/*/tessdata",
    "/usr/share/tesseract-ocr/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
    "/usr/local/share/tesseract-ocr/*/tessdata",
    "/opt/homebrew/share/tessdata",
    "/opt/local/share/tessdata",
)

INSTALL_HINT = (
    "install Tesseract's language data (Debian/Ubuntu: apt-get install tesseract-ocr tesseract-ocr-eng; "
    "macOS: brew install tesseract) or set TESSDATA_PREFIX to the folder holding eng.traineddata"
)


class OcrUnavailableError(DocMemoError):
    """OCR was required (``ocr=True``) but no engine can run here."""


@runtime_checkable
class OcrEngine(Protocol):
    """Reads the text of a rendered page."""

    name: str

    def read(self, page: pymupdf.Page) -> str:
        """Text of ``page`` as OCR sees it (lines separated by newlines)."""
        ...


def _has_language(folder: str | os.PathLike[str], language: str) -> bool:
    return all((Path(folder) / f"{lang}.traineddata").is_file() for lang in language.split("+"))


def find_tessdata(tessdata: str | None = None, language: str = "eng") -> str | None:
    """The Tesseract language-data folder holding ``language``, or None when there is none.

    Looks at ``tessdata``, then ``TESSDATA_PREFIX``, then the usual install folders, then asks the
    ``tesseract`` binary through PyMuPDF (for installs in unusual places).
    """
    if tessdata:
        return tessdata if _has_language(tessdata, language) else None
    candidates: list[str] = []
    if os.environ.get("TESSDATA_PREFIX"):
        candidates.append(os.environ["TESSDATA_PREFIX"])
    for pattern in _TESSDATA_GLOBS:
        candidates.extend(sorted(glob.glob(pattern), reverse=True))
    for folder in candidates:
        if _has_language(folder, language):
            return folder
    try:
        found = pymupdf.get_tessdata()
    except Exception:  # the binary is absent or says nothing useful: no Tesseract here
        return None
    return found if found and _has_language(found, language) else None


_ALNUM = re.compile(r"[^\W_]", re.UNICODE)


def alnum_count(text: str) -> int:
    """Letters and digits in ``text`` (whitespace and punctuation do not make a text layer)."""
    return len(_ALNUM.findall(text))


def needs_ocr(text: str, image_cover: Callable[[], float]) -> bool:
    """True for a page with (almost) no text layer whose images cover a real part of it.

    ``image_cover`` (share of the page under images) is only called for pages without text.
    """
    return alnum_count(text) < MIN_TEXT_CHARS and image_cover() >= MIN_IMAGE_COVER


def clean_ocr_text(text: str) -> str:
    """Drop the specks OCR reads in photos and drawings: lines with under two letters or digits."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if alnum_count(line) >= 2)


class TesseractOcr:
    """Tesseract through PyMuPDF.

    Args:
        tessdata: language-data folder (found automatically when None).
        language: Tesseract language code(s), e.g. "eng" or "eng+deu".
        dpi: rendering resolution for OCR; 200 read the dev slides better than 150 or 300.

    Raises:
        OcrUnavailableError: no language data for ``language`` was found.
    """

    name = "tesseract"

    def __init__(self, tessdata: str | None = None, language: str = "eng", dpi: int = 200) -> None:
        folder = find_tessdata(tessdata, language)
        if folder is None:
            where = f" in {tessdata}" if tessdata else ""
            raise OcrUnavailableError(
                f"Tesseract language data '{language}' not found{where}: {INSTALL_HINT}"
            )
        self.tessdata = folder
        self.language = language
        self.dpi = dpi

    def read(self, page: pymupdf.Page) -> str:
        return clean_ocr_text(page.get_text(textpage=self.textpage(page)))

    def textpage(self, page: pymupdf.Page) -> pymupdf.TextPage:
        """The page's OCR text layer, words with their boxes (``page.search_for(textpage=)``
        finds a citation in it)."""
        with _native_stderr_silenced():
            return page.get_textpage_ocr(
                dpi=self.dpi, full=True, tessdata=self.tessdata, language=self.language
            )


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Tesseract writes diagnostics ("Image too small to scale!!") straight to file descriptor 2,
    below Python's ``sys.stderr``; point it at /dev/null for the duration of one OCR call."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable stderr (some embedded hosts): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


PARALLEL_MIN_PAGES = 4  # below this, starting worker processes costs more than it saves

WORKER_START_SECONDS = 30.0
"""What a worker may take to start (the interpreter, PyMuPDF, Tesseract's data) before its pages."""

WORKER_SECONDS_PER_PAGE = 60.0
"""What a worker may take per page (a page reads in about 0.5 s): past it the worker is hung."""


def ocr_pages(
    path: str | os.PathLike[str],
    pages: Sequence[int],
    engine: OcrEngine,
    workers: int | None = None,
    timeout: float | None = None,
) -> dict[int, str | None]:
    """OCR text of the given 1-based pages of one PDF; None for a page whose OCR failed.

    MuPDF will not run Tesseract from two threads of one process, so with Tesseract and enough
    pages the work is split over ``workers`` child interpreters (default: the CPUs available,
    at most 4) running ``python -m llama_index_docmemo.ingest.ocr``; a scanned deck then reads
    about twice as fast on two cores. Child processes are plain subprocesses (not
    multiprocessing), so a caller's script is never re-imported. Other engines run in-process.

    Failures stay bounded: a worker that crashes has its pages read once in this process; a
    worker still running ``timeout`` seconds after the start (default: :data:`WORKER_START_SECONDS`
    plus :data:`WORKER_SECONDS_PER_PAGE` per page of its share) is killed, named in a warning,
    and its pages are indexed without text (reading them here could hang the same way).
    """
    if not pages:
        return {}
    if workers is None:
        workers = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if workers <= 1 or len(pages) < PARALLEL_MIN_PAGES or not isinstance(engine, TesseractOcr):
        return dict(_ocr_chunk(str(path), list(pages), engine))
    chunks = [list(pages[i::workers]) for i in range(workers)]
    if timeout is None:
        timeout = WORKER_START_SECONDS + WORKER_SECONDS_PER_PAGE * len(chunks[0])
    deadline = time.monotonic() + timeout
    with ExitStack() as stack:  # output goes to files: a full pipe never stalls a worker
        outputs = [stack.enter_context(tempfile.TemporaryFile()) for _ in chunks]
        procs = [
            subprocess.Popen(
                _worker_command(str(path), chunk, engine),
                stdout=output,
                stderr=subprocess.DEVNULL,
            )
            for chunk, output in zip(chunks, outputs, strict=True)
        ]
        try:
            return _collect(str(path), procs, outputs, chunks, engine, deadline, timeout)
        finally:  # whatever happened, no worker outlives the call
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def _collect(
    path: str,
    procs: Sequence[subprocess.Popen[bytes]],
    outputs: Sequence[IO[bytes]],
    chunks: Sequence[list[int]],
    engine: TesseractOcr,
    deadline: float,
    timeout: float,
) -> dict[int, str | None]:
    """The workers' texts, each worker waited for until ``deadline`` (``timeout`` after start)."""
    texts: dict[int, str | None] = {}
    for proc, output, chunk in zip(procs, outputs, chunks, strict=True):
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            logger.warning(
                "%s: OCR worker %d (pages %s) still running after %.0f s: killed; those pages "
                "are indexed without text",
                path,
                proc.pid,
                ",".join(map(str, chunk)),
                timeout,
            )
            texts.update(dict.fromkeys(chunk))
            continue
        if proc.returncode == 0:
            output.seek(0)
            texts.update({int(k): v for k, v in json.load(output).items()})
        else:  # a crashed worker: read its pages here rather than lose them
            logger.warning(
                "%s: OCR worker %d (pages %s) exited with %s; reading its pages in-process",
                path,
                proc.pid,
                ",".join(map(str, chunk)),
                proc.returncode,
            )
            texts.update(_ocr_chunk(path, chunk, engine))
    return texts


def _worker_command(path: str, pages: Sequence[int], engine: TesseractOcr) -> list[str]:
    """The command line of one OCR worker (:func:`_worker_main`) for ``pages`` of ``path``."""
    return [
        sys.executable,
        "-m",
        __name__,
        path,
        ",".join(map(str, pages)),
        engine.tessdata,
        engine.language,
        str(engine.dpi),
    ]


def _ocr_chunk(path: str, pages: list[int], engine: OcrEngine) -> list[tuple[int, str | None]]:
    """OCR some pages of a PDF in this process."""
    out: list[tuple[int, str | None]] = []
    with pymupdf.open(path) as doc:
        for page in pages:
            try:
                out.append((page, engine.read(doc[page - 1])))
            except Exception as exc:  # one unreadable scan should not lose the whole document
                logger.warning("%s page %d: OCR failed (%s); indexed without text", path, page, exc)
                out.append((page, None))
    return out


def resolve_ocr(ocr: OcrMode | OcrEngine) -> OcrEngine | None:
    """The engine to use for ``ocr``: "auto" (Tesseract if present), True/"on" (required), False/"off",
    or an engine.

    With "auto" a missing engine logs a warning and returns None: text-less pages are then indexed with
    empty text and listed as unread. With True it raises :class:`OcrUnavailableError`.
    """
    if isinstance(ocr, OcrEngine):
        return ocr
    if ocr is False or ocr == "off":
        return None
    if ocr is True or ocr == "on":
        return TesseractOcr()
    if ocr != "auto":
        raise ValueError(
            f"ocr must be 'auto', 'on', 'off', True, False or an OcrEngine, not {ocr!r}"
        )
    try:
        return TesseractOcr()
    except OcrUnavailableError as exc:
        logger.warning("OCR disabled: %s; pages without a text layer get empty text", exc)
        return None


def _worker_main(argv: Sequence[str]) -> int:
    """Child side of :func:`ocr_pages`: OCR the listed pages, print ``{page: text}`` as JSON."""
    path, pages, tessdata, language, dpi = argv
    engine = TesseractOcr(tessdata=tessdata, language=language, dpi=int(dpi))
    chunk = _ocr_chunk(path, [int(p) for p in pages.split(",") if p], engine)
    sys.stdout.write(json.dumps({str(page): text for page, text in chunk}))
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
