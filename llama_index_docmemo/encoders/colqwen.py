"""ColQwen2.5 page encoder (colpali-engine): page images -> image-token multivectors, 128 dims.

A page keeps only the vectors of its image tokens: the prompt's text tokens carry no page
content and left-padding rows are all zeros (they would score nothing in MaxSim and break
cosine distance), so both are dropped by the input ids and the attention mask before storing.
The pooled first-stage vector is the normalised mean of those image-token vectors; the grid's
(rows, columns) travel with the page, for the store's ``rows_cols`` layout. torch and
colpali-engine are imported lazily: ``pip install 'llama-index-docmemo[colqwen]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from llama_index_docmemo._extras import require
from llama_index_docmemo.encoders.base import PageEncoder
from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.types import PageEmbedding, PageInput, QueryEmbedding

StorageDtype = Literal["float32", "float16"]
_FEATURE = "ColQwenEncoder"


def _torch() -> Any:
    return require("torch", extra="colqwen", feature=_FEATURE)


def resolve_device(device: str = "auto") -> str:
    """``"auto"``: the first of cuda, mps, cpu that torch can use; any other value as given."""
    if device != "auto":
        return device
    torch = _torch()
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def default_dtype(device: str) -> Any:
    """bfloat16 on CUDA, float16 on Apple's MPS, float32 on the CPU (bf16 matmuls are slow there)."""
    torch = _torch()
    kind = device.split(":", 1)[0]
    return {"cuda": torch.bfloat16, "mps": torch.float16}.get(kind, torch.float32)


def pool_mean(vectors: np.ndarray) -> np.ndarray:
    """L2-normalised mean of a (n, dim) multivector: the prefetch vector of a page or query."""
    mean = vectors.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 0 else mean).astype(np.float32)


def _rounded(vectors: np.ndarray, storage_dtype: StorageDtype) -> np.ndarray:
    """float32 rows carrying exactly the precision the store will keep (contract: float32)."""
    return vectors.astype(storage_dtype).astype(np.float32)


class ColQwenEncoder(PageEncoder):
    """ColQwen2.5 multivectors of page images (MaxSim) with a mean-pooled prefetch vector.

    Args:
        model_name_or_path: a local model folder (loaded with ``local_files_only``) or a hub
            id (needs a machine that can reach the hub, or the hub cache).
        device: "auto" (cuda, then mps, then cpu) or a torch device string.
        dtype: torch dtype of the model; None: bf16 on CUDA, fp16 on MPS, fp32 on CPU.
        batch_size: page images per forward pass (memory grows with it).
        query_batch_size: queries per forward pass.
        storage_dtype: precision the vectors are rounded to before they leave the encoder
            ("float16" halves a float16 store and changes MaxSim by ~1e-3).
        max_visual_tokens: cap on image tokens per page (processor default when None).
        name: identifier stored with the collection; default ``colqwen2.5:<folder or id>``.

    Raises:
        MissingExtraError: torch or colpali-engine is not installed.
        DocMemoError: the model or processor cannot be loaded from ``model_name_or_path``.
    """

    modality = "image"
    sparse = False

    def __init__(
        self,
        model_name_or_path: str | Path,
        *,
        device: str = "auto",
        dtype: Any = None,
        batch_size: int = 4,
        query_batch_size: int = 32,
        storage_dtype: StorageDtype = "float16",
        max_visual_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        colpali = require("colpali_engine.models", extra="colqwen", feature=_FEATURE)
        resolved = resolve_device(device)
        torch_dtype = dtype if dtype is not None else default_dtype(resolved)
        source = str(model_name_or_path)
        local = Path(source).expanduser()
        is_local = local.exists()
        if is_local and not local.is_dir():
            raise DocMemoError(f"ColQwen2.5 model path {local} is not a folder")
        where = str(local) if is_local else source
        processor_kwargs: dict[str, Any] = {"local_files_only": is_local}
        if max_visual_tokens is not None:
            processor_kwargs["max_num_visual_tokens"] = max_visual_tokens
        try:
            model = colpali.ColQwen2_5.from_pretrained(
                where, dtype=torch_dtype, device_map=resolved, local_files_only=is_local
            )
            processor = colpali.ColQwen2_5_Processor.from_pretrained(where, **processor_kwargs)
        except (OSError, ValueError) as exc:
            hint = "" if is_local else " (a hub id needs network access or the hub cache)"
            raise DocMemoError(f"cannot load ColQwen2.5 from {where}{hint}: {exc}") from exc
        self._setup(
            model,
            processor,
            name=name or f"colqwen2.5:{local.name if is_local else source}",
            batch_size=batch_size,
            query_batch_size=query_batch_size,
            storage_dtype=storage_dtype,
        )
        self.source = where
        self.max_visual_tokens = max_visual_tokens

    @classmethod
    def from_model(
        cls,
        model: Any,
        processor: Any,
        *,
        name: str,
        batch_size: int = 4,
        query_batch_size: int = 32,
        storage_dtype: StorageDtype = "float16",
    ) -> ColQwenEncoder:
        """Wrap an already-built ``ColQwen2_5`` and ``ColQwen2_5_Processor`` (kept on their device)."""
        encoder = cls.__new__(cls)
        encoder._setup(
            model,
            processor,
            name=name,
            batch_size=batch_size,
            query_batch_size=query_batch_size,
            storage_dtype=storage_dtype,
        )
        return encoder

    def settings(self) -> dict[str, Any]:
        """The model (folder or hub id) and what changes its vectors; device and batch sizes
        belong to the machine, not the store."""
        found = {"storage_dtype": self.storage_dtype}
        if self.source is not None:
            found |= {
                "model_name_or_path": self.source,
                "max_visual_tokens": self.max_visual_tokens,
            }
        return found

    def _setup(
        self,
        model: Any,
        processor: Any,
        *,
        name: str,
        batch_size: int,
        query_batch_size: int,
        storage_dtype: StorageDtype,
    ) -> None:
        if batch_size < 1 or query_batch_size < 1:
            raise ValueError("batch_size and query_batch_size must be positive")
        self.source: str | None = None  # the model folder or hub id, when loaded from one
        self.max_visual_tokens: int | None = None
        if storage_dtype not in ("float32", "float16"):
            raise ValueError(f"storage_dtype must be 'float32' or 'float16', got {storage_dtype!r}")
        self._torch = _torch()
        self.model = model.eval()
        self.processor = processor
        self.name = name
        self.dim = int(model.dim)
        self.batch_size = batch_size
        self.query_batch_size = query_batch_size
        self.storage_dtype: StorageDtype = storage_dtype
        self.image_token_id = int(processor.image_token_id)

    @property
    def device(self) -> Any:
        return self.model.device

    def _forward(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        """(batch, tokens, dim) float32 vectors and the (batch, tokens) input ids."""
        batch = batch.to(self.device)
        with self._torch.inference_mode():
            out = self.model(**batch)
        return out.float().cpu().numpy(), batch["input_ids"].cpu().numpy()

    def _embedding(self, rows: np.ndarray, grid: tuple[int, int] | None = None) -> PageEmbedding:
        vectors = _rounded(rows, self.storage_dtype)
        return PageEmbedding(multivector=vectors, pooled=pool_mean(vectors), grid=grid)

    def page_grid(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """(columns, rows) of the image-token grid of an image of (width, height); row-major."""
        merge = int(self.model.spatial_merge_size)
        columns, rows = self.processor.get_n_patches(image_size, spatial_merge_size=merge)
        return int(columns), int(rows)

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        embeddings: list[PageEmbedding] = []
        for start in range(0, len(pages), self.batch_size):
            chunk = pages[start : start + self.batch_size]
            images = [self._image(page) for page in chunk]
            batch = self.processor.process_images(images)
            mask = batch["attention_mask"].cpu().numpy().astype(bool)
            vectors, input_ids = self._forward(batch)
            keep = mask & (input_ids == self.image_token_id)
            for page, image, rows, page_keep in zip(chunk, images, vectors, keep, strict=True):
                columns, grid_rows = self.page_grid(image.size)
                if int(page_keep.sum()) != columns * grid_rows:
                    raise DocMemoError(
                        f"page {page.ref}: {int(page_keep.sum())} image tokens, expected "
                        f"{columns}x{grid_rows} from its {image.size[0]}x{image.size[1]} image"
                    )
                embeddings.append(self._embedding(rows[page_keep], grid=(grid_rows, columns)))
        return embeddings

    def encode_queries(self, queries: Sequence[str]) -> list[QueryEmbedding]:
        embeddings: list[QueryEmbedding] = []
        for start in range(0, len(queries), self.query_batch_size):
            chunk = list(queries[start : start + self.query_batch_size])
            batch = self.processor.process_queries(queries=chunk)
            mask = batch["attention_mask"].cpu().numpy().astype(bool)
            vectors, _ = self._forward(batch)
            embeddings.extend(
                self._embedding(rows[keep]) for rows, keep in zip(vectors, mask, strict=True)
            )
        return embeddings

    @staticmethod
    def _image(page: PageInput) -> Any:
        if page.load_image is None:
            raise DocMemoError(
                f"page {page.ref}: ColQwenEncoder needs a page image (no load_image)"
            )
        image = page.load_image()
        return image.convert("RGB") if image.mode != "RGB" else image
