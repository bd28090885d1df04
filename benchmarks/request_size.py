"""Bytes and estimated image tokens of one reader request: 5 page images and 3 table-sized crops.

For each PDF, pages 2-6 are shown to :class:`VLMReader` (rendered as the engine renders them)
with three crops (the middle band of pages 2-4, rendered by the crop postprocessor's
``render_crop``); the request body is what the ``openai`` client would send (the messages as
LlamaIndex converts them, in JSON). Image tokens are the model family's formula over the sizes
sent (``llms/image_policy.py``). Runs against any checkout, so before/after compare the same way.

With ``--text`` each page also carries its text layer (as a real round does, within the
reader's 24,000 characters); ``--max-image-bytes`` sets the reader's byte budget (``off``: none;
default the reader's own, ``llms/image_policy.py``).

Usage: PYTHONPATH=<checkout> python benchmarks/request_size.py --data /work/shared/data [--docs 8]
       [--model gpt-4o | --model Qwen/Qwen2.5-VL-7B-Instruct] [--text] [--max-image-bytes N|off]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import statistics
import tempfile
from pathlib import Path

import pymupdf
from llama_index.llms.openai.utils import to_openai_message_dicts
from PIL import Image

from llama_index_docmemo.ingest.pdf import render_page
from llama_index_docmemo.llms.image_policy import image_tokens, model_family
from llama_index_docmemo.postprocessors.crops import render_crop
from llama_index_docmemo.readers.base import CropView, PageView, ReaderInput
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.step_runtime import run
from llama_index_docmemo.types import PageRef

PAGES = range(2, 7)
CROP_PAGES = range(2, 5)


def reader_input(pdf: Path, crops_dir: Path, text: bool) -> ReaderInput:
    """Five pages of ``pdf`` and three table-sized crops, as one reading round shows them."""
    doc_id = pdf.name
    crops = []
    with pymupdf.open(pdf) as doc:
        pages = [
            PageView(
                ref=PageRef(doc_id, p),
                text=doc[p - 1].get_text() if text else "",
                load_image=lambda p=p: render_page(pdf, p, 1500),
            )
            for p in PAGES
        ]
        for p in CROP_PAGES:
            rect = doc[p - 1].rect
            box = (36.0, rect.height * 0.3, rect.width - 36.0, rect.height * 0.6)
            path = crops_dir / f"{pdf.stem}-p{p}.png"
            render_crop(doc[p - 1], box, path, 1500, 200)
            crops.append(
                CropView(
                    page=PageRef(doc_id, p), kind="table", bbox=box, load_image=lambda x=path: x
                )
            )
    return ReaderInput(question="What was the total revenue?", query="", pages=pages, crops=crops)


def measure(
    reader: VLMReader, pdf: Path, crops_dir: Path, text: bool
) -> tuple[int, int, list[tuple[int, int]]]:
    """(body bytes, estimated image tokens, image sizes) of the reader's request for ``pdf``."""
    llm = reader.llm
    messages = run(reader.build(reader_input(pdf, crops_dir, text), True))
    body = json.dumps({"model": "m", "messages": to_openai_message_dicts(messages)})
    sizes = []
    for message in json.loads(body)["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part.get("type") == "image_url":
                data = part["image_url"]["url"].split(",", 1)[1]
                sizes.append(Image.open(io.BytesIO(base64.b64decode(data))).size)
    family = model_family(getattr(llm, "model", ""))
    return len(body.encode()), sum(image_tokens(family, w, h) for w, h in sizes), sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("DOCMEMO_DATA", "")))
    parser.add_argument("--docs", type=int, default=8, help="PDFs per dataset")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--text", action="store_true", help="pages carry their text layer")
    parser.add_argument("--max-image-bytes", default=None, help="the reader's budget, or off")
    args = parser.parse_args()
    if model_family(args.model).startswith(("qwen", "default")):
        from llama_index_docmemo.llms.qwen_vl import QwenVL

        llm: object = QwenVL(model=args.model, api_base="http://127.0.0.1:9/v1")
    else:
        from llama_index.llms.openai import OpenAI

        llm = OpenAI(model=args.model, api_key="sk-none")
    pdfs = []
    for name in ("mmlongbench-doc", "financebench"):
        found = sorted((args.data / name / "pdfs").glob("*.pdf"))
        pdfs += [p for p in found if pymupdf.open(p).page_count >= max(PAGES)][: args.docs]
    budget = {} if args.max_image_bytes is None else {"max_image_bytes": None}
    if args.max_image_bytes not in (None, "off"):
        budget = {"max_image_bytes": int(args.max_image_bytes)}
    reader = VLMReader(llm, images=True, **budget)  # type: ignore[arg-type]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pdf in pdfs:
            rows.append(measure(reader, pdf, Path(tmp), args.text))
    sizes = [len(r[2]) for r in rows]
    body = [r[0] / 1e6 for r in rows]
    tokens = [r[1] for r in rows]
    longest = max(max(s) for r in rows for s in r[2])
    print(f"model {args.model} ({model_family(args.model)}), {len(rows)} requests", end="")
    print(f", reader's max_image_bytes {getattr(reader, 'max_image_bytes', 'none')}")
    print(f"images per request: {min(sizes)}-{max(sizes)}; longest side sent: {longest} px")
    small = sum(b <= 1.0 for b in body)
    print(f"request body MB: mean {statistics.mean(body):.2f}, max {max(body):.2f}; ", end="")
    print(f"{small} of {len(body)} at most 1 MB")
    print(
        f"image tokens per request (estimate): mean {statistics.mean(tokens):.0f}, max {max(tokens)}"
    )
    pixels = [sum(w * h for w, h in r[2]) / 1e6 for r in rows]
    print(f"megapixels per request: mean {statistics.mean(pixels):.2f}, min {min(pixels):.2f}")


if __name__ == "__main__":
    main()
