"""ColQwenEncoder with real ColQwen2.5 weights: runs only when DOCMEMO_COLQWEN_PATH names a model folder."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("colpali_engine")

from colqwen_tiny import maxsim  # noqa: E402
from PIL import Image, ImageDraw, ImageFont  # noqa: E402

from llama_index_docmemo.encoders.colqwen import ColQwenEncoder  # noqa: E402
from llama_index_docmemo.types import PageInput, PageRef  # noqa: E402

TEXTS = (
    "Annual report 2023. Total revenue grew to 5.2 billion dollars, operating margin 18%.",
    "Photosynthesis converts light into chemical energy in the chloroplasts of plant leaves.",
)


@pytest.fixture(scope="module")
def encoder() -> ColQwenEncoder:
    path = os.environ.get("DOCMEMO_COLQWEN_PATH")
    if not path or not Path(path).is_dir():
        pytest.skip("DOCMEMO_COLQWEN_PATH is not set to a ColQwen2.5 model folder")
    return ColQwenEncoder(path)


def text_page(text: str) -> Image.Image:
    image = Image.new("RGB", (768, 1024), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=36)
    words, line, y = text.split(), "", 60
    for word in words:
        if draw.textlength(f"{line} {word}", font=font) > 680:
            draw.text((40, y), line, fill="black", font=font)
            line, y = word, y + 50
        else:
            line = f"{line} {word}".strip()
    draw.text((40, y), line, fill="black", font=font)
    return image


def test_real_model_matches_query_to_its_page(encoder: ColQwenEncoder) -> None:
    pages = encoder.encode_pages(
        [
            PageInput(PageRef("real.pdf", i + 1), "", load_image=lambda t=t: text_page(t))
            for i, t in enumerate(TEXTS)
        ]
    )
    assert all(p.multivector.shape[1] == 128 for p in pages)
    assert all(np.linalg.norm(p.multivector, axis=1).min() > 0.99 for p in pages)
    finance, biology = encoder.encode_queries(
        ["What was the revenue in 2023?", "How do plants make energy from light?"]
    )
    assert maxsim(finance.multivector, pages[0].multivector) > maxsim(
        finance.multivector, pages[1].multivector
    )
    assert maxsim(biology.multivector, pages[1].multivector) > maxsim(
        biology.multivector, pages[0].multivector
    )
