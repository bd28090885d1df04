"""OCR selection and engine resolution (no Tesseract needed: the real engine is an integration test)."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path

import pymupdf
import pytest

from llama_index_docmemo.ingest import ocr as ocr_module
from llama_index_docmemo.ingest.ocr import (
    OcrUnavailableError,
    TesseractOcr,
    clean_ocr_text,
    find_tessdata,
    needs_ocr,
    resolve_ocr,
)


class FakeEngine:
    name = "fake"

    def read(self, page: object) -> str:
        return "text"


def test_needs_ocr_only_without_text_layer_and_with_images() -> None:
    def never() -> float:
        raise AssertionError("image cover computed for a page with text")

    assert needs_ocr("", lambda: 0.9)
    assert needs_ocr(" 12 \n \n", lambda: 0.5)
    assert not needs_ocr("", lambda: 0.05)  # a blank page
    assert not needs_ocr("A page with a real text layer on it.", never)


def test_clean_ocr_text_drops_specks_and_squeezes_spaces() -> None:
    raw = "|\n  GLOBAL   OS  BREAKDOWN \n~\nee\n* a\nAndroid 82.8%\n"
    assert clean_ocr_text(raw) == "GLOBAL OS BREAKDOWN\nee\nAndroid 82.8%"


def test_find_tessdata_explicit_and_environment(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "eng.traineddata").write_bytes(b"x")
    assert find_tessdata(str(tmp_path)) == str(tmp_path)
    assert find_tessdata(str(tmp_path), language="deu") is None
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))
    assert find_tessdata() == str(tmp_path)


def test_tesseract_without_language_data_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(OcrUnavailableError, match="apt-get install tesseract-ocr"):
        TesseractOcr(tessdata=str(tmp_path))


def test_resolve_ocr_modes(monkeypatch, caplog) -> None:
    engine = FakeEngine()
    assert resolve_ocr(engine) is engine
    assert resolve_ocr(False) is None and resolve_ocr("off") is None
    with pytest.raises(ValueError, match="ocr must be"):
        resolve_ocr("always")  # type: ignore[arg-type]
    monkeypatch.setattr(ocr_module, "find_tessdata", lambda *a, **k: None)
    with caplog.at_level(logging.WARNING):
        assert resolve_ocr("auto") is None
    assert "OCR disabled" in caplog.text and "TESSDATA_PREFIX" in caplog.text
    for required in (True, "on"):
        with pytest.raises(OcrUnavailableError):
            resolve_ocr(required)


class _ScriptedTesseract(TesseractOcr):
    """A Tesseract engine without language data: reads "page N", workers scripted per test."""

    def __init__(self) -> None:
        self.tessdata, self.language, self.dpi = "unused", "eng", 200

    def read(self, page: pymupdf.Page) -> str:
        return f"page {page.number + 1}"


def _pdf(path: Path, n_pages: int) -> Path:
    with pymupdf.open() as doc:
        for _ in range(n_pages):
            doc.new_page()
        doc.save(path)
    return path


def _scripted_workers(monkeypatch: pytest.MonkeyPatch, script_for: dict[int, str]) -> None:
    """Each worker runs the script of the first page of its share (an OCR worker's stand-in)."""
    monkeypatch.setattr(
        ocr_module,
        "_worker_command",
        lambda path, pages, engine: [sys.executable, "-c", script_for[pages[0]]],
    )


def test_a_hung_ocr_worker_is_killed_and_named(tmp_path, monkeypatch, caplog) -> None:
    pdf = _pdf(tmp_path / "scan.pdf", 4)
    answer = 'import json; print(json.dumps({"2": "two", "4": "four"}))'
    _scripted_workers(monkeypatch, {1: "import time; time.sleep(120)", 2: answer})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=ocr_module.__name__):
        texts = ocr_module.ocr_pages(pdf, [1, 2, 3, 4], _ScriptedTesseract(), workers=2, timeout=2)
    assert time.monotonic() - started < 30  # not the worker's two minutes
    assert texts == {1: None, 3: None, 2: "two", 4: "four"}  # the hung share only, not re-read
    (message,) = [r.getMessage() for r in caplog.records if "killed" in r.getMessage()]
    assert "scan.pdf" in message and "pages 1,3" in message
    pid = int(re.search(r"OCR worker (\d+)", message).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped, not left running


def test_a_crashed_ocr_worker_has_its_pages_read_in_process(tmp_path, monkeypatch, caplog) -> None:
    pdf = _pdf(tmp_path / "scan.pdf", 4)
    answer = 'import json; print(json.dumps({"2": "two", "4": "four"}))'
    _scripted_workers(monkeypatch, {1: "import sys; sys.exit(3)", 2: answer})
    with caplog.at_level(logging.WARNING, logger=ocr_module.__name__):
        texts = ocr_module.ocr_pages(pdf, [1, 2, 3, 4], _ScriptedTesseract(), workers=2)
    assert texts == {1: "page 1", 3: "page 3", 2: "two", 4: "four"}
    assert any("exited with 3" in r.getMessage() for r in caplog.records)
