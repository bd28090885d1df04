"""A tiny randomly initialised ColQwen2.5 (~90k parameters) for tests and benchmarks without weights.

Same classes as the real model (``ColQwen2_5`` on a ``Qwen2_5_VLConfig``, ``ColQwen2_5_Processor``
over Qwen's image and video processors), so the whole encode -> store -> MaxSim path runs
where no checkpoint can be downloaded. The tokenizer is byte-level with Qwen's special tokens:
every text gets distinct tokens, and no vocabulary file is needed. Its vectors mean nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llama_index_docmemo._extras import require

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
PATCH_SIZE = 14
MERGE_SIZE = 2
_FEATURE = "the tiny ColQwen2.5"


def tiny_tokenizer() -> Any:
    """A byte-level tokenizer (256 byte tokens, no merges) plus Qwen's special tokens."""
    tokenizers = require("tokenizers", extra="colqwen", feature=_FEATURE)
    transformers = require("transformers", extra="colqwen", feature=_FEATURE)
    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    model = tokenizers.models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[])
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )


def tiny_processor(max_visual_tokens: int = 64) -> Any:
    """A ``ColQwen2_5_Processor`` with Qwen2-VL's image processor capped at ``max_visual_tokens``."""
    require("torchvision", extra="colqwen", feature=_FEATURE)
    colpali = require("colpali_engine.models", extra="colqwen", feature=_FEATURE)
    image_module = require(
        "transformers.models.qwen2_vl.image_processing_qwen2_vl", extra="colqwen", feature=_FEATURE
    )
    video_module = require(
        "transformers.models.qwen2_vl.video_processing_qwen2_vl", extra="colqwen", feature=_FEATURE
    )
    token_pixels = (PATCH_SIZE * MERGE_SIZE) ** 2
    image_processor = image_module.Qwen2VLImageProcessor(
        min_pixels=4 * token_pixels,
        max_pixels=max_visual_tokens * token_pixels,
        patch_size=PATCH_SIZE,
        merge_size=MERGE_SIZE,
        temporal_patch_size=2,
    )
    return colpali.ColQwen2_5_Processor(
        image_processor=image_processor,
        tokenizer=tiny_tokenizer(),
        video_processor=video_module.Qwen2VLVideoProcessor(),
    )


def tiny_model(processor: Any, *, seed: int = 0, hidden_size: int = 32) -> Any:
    """A 1-layer text model and a 1-layer vision tower, weights drawn from ``seed``."""
    torch = require("torch", extra="colqwen", feature=_FEATURE)
    colpali = require("colpali_engine.models", extra="colqwen", feature=_FEATURE)
    transformers = require("transformers", extra="colqwen", feature=_FEATURE)
    tokenizer = processor.tokenizer
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    rotary = hidden_size // 4  # half of each of the 2 heads' dims, split over (time, height, width)
    mrope_section = [rotary // 4, (rotary - rotary // 4) // 2]
    mrope_section.append(rotary - sum(mrope_section))
    config = transformers.Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden_size,
            "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 1024,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": mrope_section,
            },
        },
        vision_config={
            "depth": 1,
            "hidden_size": hidden_size,
            "intermediate_size": 2 * hidden_size,
            "num_heads": 2,
            "out_hidden_size": hidden_size,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": 2,
            "window_size": PATCH_SIZE * MERGE_SIZE * 2,
            "fullatt_block_indexes": [0],
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = colpali.ColQwen2_5(config)
    return model.eval()


def maxsim(query: np.ndarray, page: np.ndarray) -> float:
    """Reference late-interaction score, in numpy: each query row's best dot product with a
    page row, summed (what the store's MaxSim must rank by)."""
    return float((query @ page.T).max(axis=1).sum())
