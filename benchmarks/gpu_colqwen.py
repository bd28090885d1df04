"""Throughput of the ColQwen path on the best device here: page encoding and MaxSim scoring.

Uses the tiny random-weight ColQwen2.5 (``tests/colqwen_tiny.py``), or real weights with
``--model PATH``. Runs on a GPU when torch sees one and says plainly when it ran on the CPU.
Numbers from the tiny model measure the pipeline (processor, batching, row selection,
transfers), not the cost of the 3B real model.

    python benchmarks/gpu_colqwen.py --pages 64 --out reports/gpu_colqwen.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from llama_index_docmemo.encoders.colqwen import ColQwenEncoder, resolve_device
from llama_index_docmemo.types import PageInput, PageRef

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from colqwen_tiny import tiny_model, tiny_processor  # noqa: E402  (a test model, not shipped)


def page_image(index: int, size: tuple[int, int]) -> Image.Image:
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    rng = np.random.default_rng(index)
    for line in range(0, size[1] - 20, 24):
        width = int(rng.integers(size[0] // 3, size[0] - 40))
        draw.rectangle((20, line + 8, 20 + width, line + 18), fill="black")
    return image


def encoder_for(args: argparse.Namespace, device: str) -> ColQwenEncoder:
    if args.model:
        return ColQwenEncoder(args.model, device=device, batch_size=args.batch_size)
    processor = tiny_processor(max_visual_tokens=args.visual_tokens)
    model = tiny_model(processor).to(device)
    return ColQwenEncoder.from_model(model, processor, name="tiny", batch_size=args.batch_size)


def maxsim_throughput(torch: Any, device: str, pages: int, vectors: int, reps: int) -> float:
    """Pages scored per second by batched MaxSim (one 20-token query, fp16 on GPU)."""
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    gen = torch.Generator(device="cpu").manual_seed(0)
    docs = torch.nn.functional.normalize(torch.randn(pages, vectors, 128, generator=gen), dim=-1)
    query = torch.nn.functional.normalize(torch.randn(20, 128, generator=gen), dim=-1)
    docs, query = docs.to(device, dtype), query.to(device, dtype)

    def run() -> None:
        torch.einsum("qd,pvd->pqv", query, docs).amax(dim=2).sum(dim=1).float().cpu()

    run()
    start = time.perf_counter()
    for _ in range(reps):
        run()
    return pages * reps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a ColQwen2.5 model folder (default: the tiny model)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--pages", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--visual-tokens", type=int, default=768, help="tiny model's token cap")
    parser.add_argument("--maxsim-pages", type=int, default=10_000)
    parser.add_argument("--maxsim-vectors", type=int, default=768)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    import torch

    device = resolve_device(args.device)
    if device == "cpu":
        print("no GPU visible to torch: running on the CPU (numbers are CPU numbers)")
    encoder = encoder_for(args, device)
    inputs = [
        PageInput(
            PageRef("bench.pdf", i + 1), "", load_image=lambda i=i: page_image(i, (768, 1024))
        )
        for i in range(args.pages)
    ]
    encoder.encode_pages(inputs[: args.batch_size])  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    embeddings = encoder.encode_pages(inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    maxsim_pages = args.maxsim_pages if device != "cpu" else min(args.maxsim_pages, 1_000)
    result = {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "model": args.model or "tiny random ColQwen2.5",
        "pages": args.pages,
        "vectors_per_page": int(np.mean([len(e.multivector) for e in embeddings])),
        "pages_per_s": args.pages / seconds,
        "maxsim_pages": maxsim_pages,
        "maxsim_vectors": args.maxsim_vectors,
        "maxsim_pages_per_s": maxsim_throughput(
            torch, device, maxsim_pages, args.maxsim_vectors, reps=5
        ),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
