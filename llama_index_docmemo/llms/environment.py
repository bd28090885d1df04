"""The environment variables every OpenAI-compatible client setting falls back to.

Read by ``pydantic-settings`` (prefix ``DOCMEMO_LLM_``) each time a client is built, so a
variable set after import counts. Blank values count as unset; a value that does not parse is an
:class:`~llama_index_docmemo.errors.LLMError` naming the variable.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from llama_index_docmemo.errors import LLMError

PREFIX = "DOCMEMO_LLM_"
ENV_URL = f"{PREFIX}URL"
ENV_MODEL = f"{PREFIX}MODEL"
ENV_API_KEY = f"{PREFIX}API_KEY"
ENV_STRUCTURED_MODE = f"{PREFIX}STRUCTURED_MODE"
ENV_CONTEXT_WINDOW = f"{PREFIX}CONTEXT_WINDOW"
ENV_MAX_TOKENS = f"{PREFIX}MAX_TOKENS"
ENV_DEADLINE = f"{PREFIX}DEADLINE"
ENV_TIMEOUT = f"{PREFIX}TIMEOUT"
ENV_IMAGES = f"{PREFIX}IMAGES"

_KINDS = {
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "bool_parsing": "a switch (1/0, true/false, on/off)",
}


class LLMEnvironment(BaseSettings):
    """``$DOCMEMO_LLM_*``: what :class:`~llama_index_docmemo.OpenAICompatible` and the
    ``docmemo`` command fall back to when an argument is not given (None: unset)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, extra="ignore")

    url: str | None = None
    model: str | None = None
    api_key: str | None = None
    structured_mode: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    deadline: float | None = None
    timeout: float | None = None
    images: bool | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value


def llm_environment() -> LLMEnvironment:
    """The ``$DOCMEMO_LLM_*`` variables now; an error naming the variable that does not parse."""
    try:
        return LLMEnvironment()
    except ValidationError as error:
        problem = error.errors()[0]
        name = f"{PREFIX}{str(problem['loc'][0]).upper()}"
        kind = _KINDS.get(problem["type"], "valid")
        raise LLMError(f"${name}={problem['input']!r} is not {kind}") from None
