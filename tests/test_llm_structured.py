"""Structured-output request forms per server, refusal detection, the per-server memory (pure)."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_docmemo.llms.servers import ServerMemory
from llama_index_docmemo.llms.structured import (
    AUTO_ORDER,
    CONCRETE_MODES,
    FALLBACKS,
    error_param,
    next_mode,
    normalise_mode,
    refuses_form,
    request_options,
    with_schema_in_prompt,
)

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "json_schema",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "r", "schema": SCHEMA, "strict": True},
                }
            },
        ),
        ("json_object", {"response_format": {"type": "json_object", "schema": SCHEMA}}),
        ("structured_outputs", {"extra_body": {"structured_outputs": {"json": SCHEMA}}}),
        ("guided_json", {"extra_body": {"guided_json": SCHEMA}}),
        ("prompt", {}),
    ],
)
def test_each_mode_asks_in_its_servers_form(mode: str, expected: dict) -> None:
    assert request_options(mode, SCHEMA, "r") == expected


def test_every_concrete_mode_has_a_form_and_auto_has_none() -> None:
    for mode in CONCRETE_MODES:
        request_options(mode, SCHEMA, "r")
    with pytest.raises(ValueError):
        request_options("auto", SCHEMA, "r")


def test_mode_names_are_checked_and_the_old_name_maps() -> None:
    assert normalise_mode("response_format") == "json_schema"
    assert normalise_mode("auto") == "auto"
    with pytest.raises(ValueError, match="not one of"):
        normalise_mode("xml")


def test_auto_walks_schema_then_llama_cpp_then_prompt() -> None:
    assert [server for server, _ in FALLBACKS][1].startswith("llama.cpp")
    assert AUTO_ORDER == ("json_schema", "json_object", "prompt")
    assert [next_mode(m) for m in AUTO_ORDER] == ["json_object", "prompt", None]
    assert next_mode("guided_json") is None


LLAMA_CPP_PYTHON_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", "
    "line 376, in create_chat_completion\n    POST /v1/chat/completions"
)
"""llama-cpp-python 0.3.36's answer (HTTP 500, no ``param``) to ``json_schema`` (issue 17)."""


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (500, LLAMA_CPP_PYTHON_REFUSAL),
        (400, "Unrecognized request argument supplied: guided_json"),  # OpenAI, vLLM's field
        (400, "Unrecognized request argument supplied: structured_outputs"),
        (
            400,
            "Additional properties are not allowed ('schema' was unexpected) - 'response_format'",
        ),
        (
            400,
            "Invalid schema for response_format 'FeedbackReply': In context=(), "
            "'additionalProperties' is required to be supplied and to be false.",
        ),
    ],
)
def test_each_refusal_text_matches_the_server_s_real_message(status: int, message: str) -> None:
    """Servers whose error names no field: their text, each pattern against its real message."""
    assert refuses_form(status, None, message)
    assert not refuses_form(None, None, message)  # no reply: a timeout or a connection error
    assert not refuses_form(200, None, message)


@pytest.mark.parametrize(
    ("param", "refused"),
    [
        ("response_format", True),
        ("response_format.json_schema", True),
        ("guided_json", True),
        ("messages", False),
        ("model", False),
    ],
)
def test_a_field_the_server_names_decides_without_reading_the_text(param, refused) -> None:
    # the text would say "refused" for every one of these: only the field counts
    assert refuses_form(400, param, "Invalid schema for response_format 'x'") is refused


@pytest.mark.parametrize(
    ("status", "message"),
    [(500, "CUDA out of memory"), (400, "model 'x' does not exist"), (429, "Rate limit reached")],
)
def test_other_errors_are_not_refusals_of_the_form(status: int, message: str) -> None:
    assert not refuses_form(status, None, message)


def test_the_param_is_read_from_an_openai_style_error_body() -> None:
    body = (
        '{"error": {"message": "x", "type": "invalid_request_error", "param": "response_format"}}'
    )
    assert error_param(body) == "response_format"
    vllm = '{"object": "error", "message": "x", "type": "BadRequestError", "param": null}'
    assert error_param(vllm) is None and error_param("<html>busy</html>") is None


def test_prompt_mode_appends_the_schema_to_the_system_turn() -> None:
    msgs = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="q")]
    out = with_schema_in_prompt(msgs, SCHEMA)
    assert out[0].content.startswith("Be brief.") and '"required":["a"]' in out[0].content
    assert out[1] is msgs[1] and msgs[0].content == "Be brief."
    bare = with_schema_in_prompt([ChatMessage(role="user", content="q")], SCHEMA)
    assert bare[0].role == "system" and "JSON schema" in bare[0].content


def test_server_memory_is_per_server_and_model_and_bounded() -> None:
    memory = ServerMemory(capacity=2)
    memory.update("http://a/v1#m", structured_mode="json_object")
    assert memory.get("http://a/v1#m").structured_mode == "json_object"
    assert memory.get("http://a/v1#other").structured_mode is None
    memory.update("http://a/v1#m", context_window=2048)
    assert memory.get("http://a/v1#m").structured_mode == "json_object"  # facts add up
    memory.update("http://b/v1#m", refuses_images=True)
    memory.update("http://c/v1#m", refuses_images=True)  # the least recently used goes
    assert memory.get("http://a/v1#m").context_window is None
    assert memory.get("http://b/v1#m").refuses_images
    memory.forget("http://b/v1#m")
    assert not memory.get("http://b/v1#m").refuses_images


def test_server_key_names_the_base_url_without_a_trailing_slash_and_the_model() -> None:
    from types import SimpleNamespace

    from llama_index_docmemo.llms.servers import server_key

    assert server_key(SimpleNamespace(api_base="http://a/v1/", model="m")) == "http://a/v1#m"
    assert server_key(SimpleNamespace(base_url="http://o:11434", model="llava")) == (
        "http://o:11434#llava"
    )
    assert server_key(SimpleNamespace(model="m")) is None
