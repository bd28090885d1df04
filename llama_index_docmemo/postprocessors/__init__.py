"""Node postprocessors: table/figure crops of the pages read (adaptive granularity)."""

from llama_index_docmemo.postprocessors.crops import CropPostprocessor, render_crop

__all__ = ["CropPostprocessor", "render_crop"]
