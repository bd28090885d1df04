"""Chat LLMs for the VLM reasoner: Qwen-VL behind a vLLM OpenAI-compatible server."""

from llama_index_docmemo.llms.qwen_vl import QwenVL, png_image_block

__all__ = ["QwenVL", "png_image_block"]
