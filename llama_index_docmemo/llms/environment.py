"""The environment variables every OpenAI-compatible client setting falls back to."""

from __future__ import annotations

import os

from llama_index_docmemo.errors import LLMError

ENV_URL = "DOCMEMO_LLM_URL"
ENV_MODEL = "DOCMEMO_LLM_MODEL"
ENV_API_KEY = "DOCMEMO_LLM_API_KEY"
ENV_STRUCTURED_MODE = "DOCMEMO_LLM_STRUCTURED_MODE"
ENV_CONTEXT_WINDOW = "DOCMEMO_LLM_CONTEXT_WINDOW"
ENV_MAX_TOKENS = "DOCMEMO_LLM_MAX_TOKENS"
ENV_DEADLINE = "DOCMEMO_LLM_DEADLINE"
ENV_TIMEOUT = "DOCMEMO_LLM_TIMEOUT"
ENV_IMAGES = "DOCMEMO_LLM_IMAGES"


def env_text(name: str) -> str | None:
    """``$name`` stripped, or None when unset or blank."""
    raw = os.environ.get(name)
    return raw.strip() if raw and raw.strip() else None


def env_int(name: str) -> int | None:
    """``$name`` as an integer (None when unset); an error naming the variable otherwise."""
    raw = env_text(name)
    try:
        return None if raw is None else int(raw)
    except ValueError:
        raise LLMError(f"${name}={raw!r} is not a whole number") from None


def env_float(name: str) -> float | None:
    """``$name`` as a number (None when unset); an error naming the variable otherwise."""
    raw = env_text(name)
    try:
        return None if raw is None else float(raw)
    except ValueError:
        raise LLMError(f"${name}={raw!r} is not a number") from None


def env_flag(name: str) -> bool | None:
    """``$name`` as a switch: 0 / false / no / off are False, anything else True."""
    raw = env_text(name)
    return None if raw is None else raw.lower() not in ("0", "false", "no", "off")
