"""QwenVL without a server: configuration, image shaping, structured-output options, retry waits."""

from __future__ import annotations

import io

import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock
from PIL import Image

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms.qwen_vl import (
    DEFAULT_MODEL,
    QwenVL,
    fit_image,
    png_image_block,
    retry_delay,
)


def decoded(block: ImageBlock) -> Image.Image:
    image = Image.open(block.resolve_image())
    image.load()
    return image


def test_settings_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_LLM_URL", "http://gpu-box:8000/v1/")
    monkeypatch.setenv("DOCMEMO_LLM_MODEL", "qwen-72b")
    monkeypatch.setenv("DOCMEMO_LLM_API_KEY", "secret")
    llm = QwenVL()
    assert (llm.api_base, llm.model, llm.api_key) == (
        "http://gpu-box:8000/v1",
        "qwen-72b",
        "secret",
    )
    assert llm.metadata.is_chat_model and llm.metadata.context_window == 32768


def test_arguments_win_over_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_LLM_URL", "http://env:1/v1")
    monkeypatch.delenv("DOCMEMO_LLM_MODEL", raising=False)
    monkeypatch.delenv("DOCMEMO_LLM_API_KEY", raising=False)
    llm = QwenVL(api_base="http://arg:2/v1", timeout=5, max_retries=1)
    assert llm.api_base == "http://arg:2/v1" and llm.model == DEFAULT_MODEL
    assert llm.api_key == "EMPTY" and llm.timeout == 5 and llm.max_retries == 1


def test_no_url_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("DOCMEMO_LLM_URL", raising=False)
    with pytest.raises(LLMError, match="DOCMEMO_LLM_URL"):
        QwenVL()


def test_the_openai_client_does_not_retry_on_its_own() -> None:
    llm = QwenVL(api_base="http://127.0.0.1:9/v1", max_retries=4)
    assert llm._get_client().max_retries == 0
    assert llm._get_aclient().max_retries == 0


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("response_format", "response_format"),
        ("structured_outputs", "extra_body"),
        ("guided_json", "extra_body"),
    ],
)
def test_json_kwargs_follow_the_structured_mode(mode: str, expected: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    kwargs = QwenVL(api_base="http://x/v1", structured_mode=mode).json_kwargs(schema, "r")
    assert list(kwargs) == [expected]
    if mode == "response_format":
        assert kwargs["response_format"]["json_schema"]["schema"] == schema
    elif mode == "structured_outputs":
        assert kwargs["extra_body"] == {"structured_outputs": {"json": schema}}
    else:
        assert kwargs["extra_body"] == {"guided_json": schema}


def test_images_are_downscaled_to_the_long_side_limit() -> None:
    assert fit_image(Image.new("RGB", (3000, 1200)), 1500).size == (1500, 600)
    assert fit_image(Image.new("RGB", (800, 600)), 1500).size == (800, 600)
    assert fit_image(Image.new("CMYK", (10, 10)), 1500).mode == "RGB"
    block = png_image_block(Image.new("RGB", (1200, 4000)), 1500)
    image = decoded(block)
    assert block.image_mimetype == "image/png" and image.format == "PNG"
    assert image.size == (450, 1500)


def test_prepare_caps_images_per_request() -> None:
    llm = QwenVL(api_base="http://x/v1", max_images_per_prompt=2)
    block = png_image_block(Image.new("RGB", (10, 10)))
    msgs = [ChatMessage(role="user", blocks=[TextBlock(text="hi"), block, block, block])]
    with pytest.raises(ValueError, match="max_images_per_prompt=2"):
        llm._prepare(msgs)


def test_prepare_reencodes_large_or_non_png_images() -> None:
    llm = QwenVL(api_base="http://x/v1", max_image_side=500)
    buf = io.BytesIO()
    Image.new("RGB", (1000, 800), "red").save(buf, format="JPEG")
    small = png_image_block(Image.new("RGB", (100, 100)))
    msgs = [ChatMessage(role="user", blocks=[ImageBlock(image=buf.getvalue()), small])]
    out = llm._prepare(msgs)[0].blocks
    first = decoded(out[0])
    assert first.format == "PNG" and first.size == (500, 400)
    assert out[1] is small


@pytest.mark.parametrize(
    ("attempt", "retry_after", "expected"),
    [(0, None, 0.5), (1, None, 1.0), (3, None, 4.0), (10, None, 8.0), (0, 2.0, 2.0), (5, 0.0, 0.0)],
)
def test_retry_waits_back_off_and_honour_retry_after(attempt, retry_after, expected) -> None:
    assert retry_delay(attempt, retry_after, base=0.5, cap=8.0) == expected


def test_a_retry_after_beyond_the_cap_means_give_up() -> None:
    assert retry_delay(0, 3600.0, base=0.5, cap=30.0) is None


def test_jitter_only_shortens_the_wait() -> None:
    waits = [retry_delay(2, None, base=0.5, cap=8.0, jitter=j) for j in (0.0, 0.5, 0.99)]
    assert waits[0] == 2.0 and all(1.5 <= w <= 2.0 for w in waits)
