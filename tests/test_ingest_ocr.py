"""OCR selection and engine resolution (no Tesseract needed: the real engine is an integration test)."""

from __future__ import annotations

import logging
from pathlib import Path

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
