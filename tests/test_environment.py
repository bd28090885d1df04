"""The environment variables, read by pydantic-settings: one store-folder variable, the
``DOCMEMO_LLM_*`` fallbacks, and errors that name the variable."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from llama_index_docmemo.cli import build_parser
from llama_index_docmemo.cli.options import store_path
from llama_index_docmemo.errors import LLMError
from llama_index_docmemo.llms.environment import llm_environment
from llama_index_docmemo.paths import default_cache_dir, default_store_dir


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STORE_DIR", "STORE", "CACHE_DIR", "QDRANT_URL", "QDRANT_API_KEY"):
        monkeypatch.delenv(f"DOCMEMO_{name}", raising=False)
    for name in ("URL", "MODEL", "API_KEY", "MAX_TOKENS", "TIMEOUT", "IMAGES", "DEADLINE"):
        monkeypatch.delenv(f"DOCMEMO_LLM_{name}", raising=False)


def test_the_cli_and_the_python_api_share_one_store_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_STORE_DIR", str(tmp_path / "store"))
    args = build_parser().parse_args(["search", "revenue"])
    assert store_path(args) == default_store_dir() == tmp_path / "store"
    explicit = build_parser().parse_args(["search", "revenue", "--store", str(tmp_path / "x")])
    assert store_path(explicit) == tmp_path / "x"


def test_the_old_store_variable_still_counts_with_a_deprecation_warning(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("DOCMEMO_STORE", str(tmp_path / "old"))
    with pytest.warns(DeprecationWarning, match="DOCMEMO_STORE_DIR"):
        assert default_store_dir() == tmp_path / "old"
    monkeypatch.setenv("DOCMEMO_STORE_DIR", str(tmp_path / "new"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new variable wins, silently
        assert default_store_dir() == tmp_path / "new"


def test_blank_variables_count_as_unset(monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_STORE_DIR", "")
    monkeypatch.setenv("DOCMEMO_CACHE_DIR", "")
    assert default_store_dir().name == "store" and default_store_dir() != Path("")
    assert default_cache_dir() != Path("")
    monkeypatch.setenv("DOCMEMO_LLM_URL", "   ")
    monkeypatch.setenv("DOCMEMO_LLM_MAX_TOKENS", "")
    env = llm_environment()
    assert env.url is None and env.max_tokens is None


def test_llm_variables_parse_and_bad_values_name_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_LLM_URL", " http://gpu:8000/v1 ")
    monkeypatch.setenv("DOCMEMO_LLM_MAX_TOKENS", "512")
    monkeypatch.setenv("DOCMEMO_LLM_TIMEOUT", "2.5")
    monkeypatch.setenv("DOCMEMO_LLM_IMAGES", "off")
    env = llm_environment()
    assert (env.url, env.max_tokens, env.timeout, env.images) == (
        "http://gpu:8000/v1",
        512,
        2.5,
        False,
    )
    for name, value, kind in [
        ("MAX_TOKENS", "many", "whole number"),
        ("TIMEOUT", "soon", "a number"),
        ("IMAGES", "maybe", "a switch"),
    ]:
        monkeypatch.setenv(f"DOCMEMO_LLM_{name}", value)
        with pytest.raises(LLMError, match=rf"\$DOCMEMO_LLM_{name}='{value}' is not .*{kind}"):
            llm_environment()
        monkeypatch.delenv(f"DOCMEMO_LLM_{name}")


def test_cli_defaults_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DOCMEMO_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("DOCMEMO_QDRANT_API_KEY", "k")
    monkeypatch.setenv("DOCMEMO_LLM_URL", "http://llm:8000/v1")
    monkeypatch.setenv("DOCMEMO_LLM_MODEL", "qwen")
    args = build_parser().parse_args(["ask", "what?"])
    assert (args.url, args.api_key) == ("http://qdrant:6333", "k")
    assert (args.llm_url, args.llm_model) == ("http://llm:8000/v1", "qwen")
