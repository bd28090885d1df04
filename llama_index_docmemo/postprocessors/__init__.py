"""Node postprocessors: table/figure crops of the pages read (adaptive granularity) and the
schema-summary LLM reranker."""

from llama_index_docmemo.postprocessors.crops import CropPostprocessor, render_crop
from llama_index_docmemo.postprocessors.rerank import LLMReranker, RoundQueryBundle

__all__ = ["CropPostprocessor", "LLMReranker", "RoundQueryBundle", "render_crop"]
