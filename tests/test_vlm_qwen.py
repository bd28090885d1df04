"""QwenVL / OpenAICompatible without a server: configuration, image shaping, client retries."""

from __future__ import annotations

import io

import httpx
import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock
from PIL import Image

from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms import OpenAICompatible
from llama_index_docmemo.llms.images import ImageSizing, encode_image
from llama_index_docmemo.llms.qwen_vl import DEFAULT_MODEL, QwenVL

PNG = ImageSizing(image_format="PNG")


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


def test_the_openai_client_does_the_retries_and_timeouts() -> None:
    llm = QwenVL(api_base="http://127.0.0.1:9/v1", max_retries=4, timeout=7)
    for client in (llm._sync_client(), llm._new_aclient()):
        assert client.max_retries == 4 and client.timeout == httpx.Timeout(7)


def test_settings_for_any_server_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_LLM_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("DOCMEMO_LLM_MODEL", "smollm2")
    monkeypatch.setenv("DOCMEMO_LLM_STRUCTURED_MODE", "json_object")
    monkeypatch.setenv("DOCMEMO_LLM_CONTEXT_WINDOW", "2048")
    monkeypatch.setenv("DOCMEMO_LLM_MAX_TOKENS", "256")
    monkeypatch.setenv("DOCMEMO_LLM_DEADLINE", "30")
    monkeypatch.setenv("DOCMEMO_LLM_IMAGES", "0")
    llm = OpenAICompatible()
    assert (llm.model, llm.structured_mode, llm.context_window) == ("smollm2", "json_object", 2048)
    assert (llm.max_tokens, llm.request_deadline, llm.multimodal) == (256, 30.0, False)
    budget = llm.context_budget()  # the window is set: no request to the server
    assert (budget.window, budget.reply_tokens, budget.tokens_per_image) == (2048, 256, 0)


def test_a_generic_server_needs_a_model_name(monkeypatch) -> None:
    monkeypatch.delenv("DOCMEMO_LLM_MODEL", raising=False)
    with pytest.raises(LLMError, match="no model name for http://x/v1"):
        OpenAICompatible(api_base="http://x/v1")


def test_unknown_structured_modes_are_refused_and_the_old_name_still_works() -> None:
    with pytest.raises(ValueError, match="json_object"):
        OpenAICompatible(api_base="http://x/v1", model="m", structured_mode="grammar")
    old = OpenAICompatible(api_base="http://x/v1", model="m", structured_mode="response_format")
    assert old.structured_mode == "json_schema"


def test_a_text_only_llm_refuses_images_before_sending() -> None:
    llm = OpenAICompatible(api_base="http://x/v1", model="m", multimodal=False)
    block = encode_image(Image.new("RGB", (10, 10)), PNG)
    with pytest.raises(ValueError, match="text-only"):
        llm._prepare([ChatMessage(role="user", blocks=[TextBlock(text="hi"), block])])


def test_images_are_downscaled_to_the_long_side_limit() -> None:
    sizing = ImageSizing(max_side=1500, image_format="PNG")
    block = encode_image(Image.new("RGB", (1200, 4000)), sizing)
    image = decoded(block)
    assert block.image_mimetype == "image/png" and image.format == "PNG"
    assert image.size == (450, 1500)  # the default family's own cap (1536) is above
    assert decoded(encode_image(Image.new("CMYK", (10, 10)), sizing)).mode == "RGB"


def test_prepare_caps_images_per_request() -> None:
    llm = QwenVL(api_base="http://x/v1", max_images_per_prompt=2)
    block = encode_image(Image.new("RGB", (10, 10)), PNG)
    msgs = [ChatMessage(role="user", blocks=[TextBlock(text="hi"), block, block, block])]
    with pytest.raises(ValueError, match="max_images_per_prompt=2"):
        llm._prepare(msgs)


def test_prepare_reencodes_large_images_or_another_format_than_asked() -> None:
    llm = QwenVL(api_base="http://x/v1", max_image_side=500)
    buf = io.BytesIO()
    Image.new("RGB", (1000, 800), "red").save(buf, format="BMP")
    small = encode_image(Image.new("RGB", (100, 100)), PNG)
    msgs = [ChatMessage(role="user", blocks=[ImageBlock(image=buf.getvalue()), small])]
    out = llm._prepare(msgs)[0].blocks
    first = decoded(out[0])  # Qwen-VL: JPEG at multiples of 28 within the 500-px cap
    assert first.format == "JPEG" and first.size == (476, 392)
    assert out[1] is small
    as_png = QwenVL(api_base="http://x/v1", image_format="PNG")._prepare(
        [ChatMessage(role="user", blocks=[encode_image(Image.new("RGB", (56, 56)), ImageSizing())])]
    )
    assert decoded(as_png[0].blocks[0]).format == "PNG"


@pytest.mark.parametrize(
    "reply", [{"choices": []}, {"choices": [{"index": 0}]}, "<html>busy</html>"]
)
def test_a_reply_without_a_message_is_an_llm_error_naming_the_server(reply) -> None:
    """A 200 whose body has no message to read (no choice, a choice without message, a proxy's
    HTML page) ends as the package's LLMError naming the server, not an IndexError."""
    from openai.types.chat import ChatCompletion

    from llama_index_docmemo.llms.wire import chat_response

    raw = ChatCompletion.construct(**reply) if isinstance(reply, dict) else reply
    with pytest.raises(
        LLMError, match=r"http://x/v1 \(model m\) sent a reply that is not a usable"
    ):
        chat_response(raw, "LLM endpoint http://x/v1 (model m)")


def test_a_pickled_llm_leaves_its_clients_behind_and_keeps_what_it_learnt(caplog) -> None:
    """A Ray worker gets the settings and the server memory, and makes its own HTTP clients."""
    import pickle

    llm = QwenVL(api_base="http://127.0.0.1:9/v1", max_retries=4, default_headers={"x-a": "b"})
    llm._sync_client()
    llm.server_memory.update(llm.server, context_window=4096)
    shipped = pickle.loads(pickle.dumps(llm))
    assert shipped._sync is None and not shipped._aclients
    assert shipped.server_memory.get(shipped.server).context_window == 4096
    assert shipped._sync_client().max_retries == 4 and shipped.default_headers == {"x-a": "b"}
    assert "unpickleable" not in caplog.text
