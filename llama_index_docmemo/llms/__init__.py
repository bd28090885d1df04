"""Chat LLMs behind OpenAI-compatible servers (vLLM, llama.cpp, Ollama, OpenAI).

Names are imported lazily, so reading :mod:`.environment` (``docmemo --help`` does) does not
import ``openai`` or ``llama_index.core``.
"""

from __future__ import annotations

from llama_index_docmemo.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "ContextBudget": "llama_index_docmemo.llms.context",
    "ContextWindowError": "llama_index_docmemo.llms.context",
    "ImageSizing": "llama_index_docmemo.llms.images",
    "OpenAICompatible": "llama_index_docmemo.llms.openai_compatible",
    "QwenVL": "llama_index_docmemo.llms.qwen_vl",
    "ServerMemory": "llama_index_docmemo.llms.servers",
    "deadline_scope": "llama_index_docmemo.llms.wire",
    "encode_image": "llama_index_docmemo.llms.images",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
