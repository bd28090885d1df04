"""Chat LLMs behind OpenAI-compatible servers (vLLM, llama.cpp, Ollama, OpenAI)."""

from llama_index_docmemo.llms.context import ContextBudget, ContextWindowError
from llama_index_docmemo.llms.deadline import deadline_scope
from llama_index_docmemo.llms.images import ImageSizing, encode_image
from llama_index_docmemo.llms.openai_compatible import OpenAICompatible
from llama_index_docmemo.llms.qwen_vl import QwenVL
from llama_index_docmemo.llms.servers import ServerMemory

__all__ = [
    "ContextBudget",
    "ContextWindowError",
    "ImageSizing",
    "OpenAICompatible",
    "QwenVL",
    "ServerMemory",
    "deadline_scope",
    "encode_image",
]
