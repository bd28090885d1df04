"""Whether an LLM is shown page images: one decision for the engine, the readers, the reranker and
the summariser alike.

``images=True`` / ``False`` is the caller's word. ``"auto"`` decides, in this order: a server that
refused image content earlier (as its server memory knows, ``llms/servers.py``) gets text; an LLM with its own
``multimodal`` flag (:class:`~llama_index_docmemo.OpenAICompatible`, ``QwenVL``) is taken at its
word; otherwise the model families LlamaIndex's LLM classes serve with vision (OpenAI's gpt-4o /
gpt-4.1 / gpt-5 / o-series, Anthropic's Claude 3 and later, Gemini, Ollama's vision models) get
images, and everything else text. ``OpenAILike`` talks to an unknown server, so it gets text
unless told otherwise. Images always travel as ``ImageBlock``s in ``ChatMessage.blocks``, which
every LlamaIndex LLM class converts to its provider's form. Pure apart from reading the server memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from llama_index_docmemo.llms.servers import ServerMemory, memory_for, server_key

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

ImagesSetting = bool | Literal["auto"]
"""``images=`` everywhere: True, False, or "auto" (decided by :func:`decide_images`)."""

_OPENAI = re.compile(
    r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-4-vision|gpt-5|o1(?!-mini)|o3|o4)",
    re.IGNORECASE,
)
_ANTHROPIC = re.compile(r"claude-(3|[4-9]|opus|sonnet|haiku)", re.IGNORECASE)
_GEMINI = re.compile(r"gemini|gemma-3", re.IGNORECASE)
_OLLAMA = re.compile(
    r"^(llava|bakllava|llama3\.2-vision|llama4|qwen2\.5vl|qwen2\.5-vl|qwen3-vl|qwen-vl|minicpm-v|"
    r"moondream|granite3\.2-vision|mistral-small3\.[12]|gemma3(?!:1b|:270m)|llava-llama3|"
    r"llava-phi3)",
    re.IGNORECASE,
)
_FAMILIES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    (("OpenAI", "AzureOpenAI", "OpenAIResponses"), _OPENAI, "OpenAI"),
    (("Anthropic", "Bedrock", "BedrockConverse", "Vertex"), _ANTHROPIC, "Anthropic Claude"),
    (("Gemini", "GoogleGenAI", "Vertex"), _GEMINI, "Gemini"),
    (("Ollama",), _OLLAMA, "Ollama vision"),
)


@dataclass(frozen=True)
class ImageChoice:
    """The decision and why (logged once per engine and recorded in the trace)."""

    send: bool
    reason: str


def model_name(llm: LLM) -> str:
    """The model an LLM object talks to ("" when it does not say)."""
    for attr in ("model", "model_name"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    try:
        return str(llm.metadata.model_name or "")
    except Exception:  # an LLM whose metadata needs a server round trip or a key
        return ""


def decide_images(
    llm: LLM, images: ImagesSetting = "auto", memory: ServerMemory | None = None
) -> ImageChoice:
    """Whether ``llm`` is shown page images (see the module docstring for "auto"); ``memory``:
    the reader's server memory (see :func:`~llama_index_docmemo.llms.servers.memory_for`)."""
    name = type(llm).__name__
    model = model_name(llm)
    if images is True or images is False:
        said = "on" if images else "off"
        return ImageChoice(images, f"images={said} for {name} ({model or 'model unknown'})")
    if images != "auto":
        raise ValueError(f"images must be True, False or 'auto', not {images!r}")
    key = server_key(llm)
    if key is not None and memory_for(llm, memory).get(key).refuses_images:
        return ImageChoice(False, f"{key} refused image content earlier: text only")
    own = getattr(llm, "multimodal", None)
    if isinstance(own, bool):
        how = "takes images" if own else "is text-only"
        return ImageChoice(own, f"{name} {model} {how} (its multimodal setting)")
    bare = model.rsplit("/", 1)[-1]
    for classes, pattern, family in _FAMILIES:
        if name in classes and pattern.search(bare):
            return ImageChoice(True, f"{name} {model}: a {family} model with vision")
    if name == "OpenAILike":
        return ImageChoice(
            False, f"OpenAILike {model}: an unknown server, text only (images=True to send them)"
        )
    return ImageChoice(
        False, f"{name} {model or ''}: no known vision model, text only (images=True to send them)"
    )
