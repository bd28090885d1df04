"""LLM calls, prompt tokens and images per question of ``docmemo compare``, on a scripted server.

The integration test's set-up (``integration_tests/test_eval_compare.py``): two generated PDFs
(10 and 8 pages), three questions, DocMemo and the stock engine through one ``QwenVL`` client
against the scripted OpenAI-compatible server, which counts a prompt's tokens as its text
characters / 4 (images not counted) and reports them as usage. The reader's script answers once
a shown page holds the fact, as a capable reader would. Runs against any checkout.

Usage: PYTHONPATH=<checkout>:<checkout>/integration_tests python benchmarks/compare_cost.py [--pages 6]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from fake_vllm_server import FakeVLLM
from test_eval_compare import MODEL, llm, make_pdf, scripted

from llama_index_docmemo.evaluation.compare import compare
from llama_index_docmemo.llms import OpenAICompatible

QUESTIONS = [
    {"id": "rev", "question": "What was the revenue of Alpha in 2023?", "expected": "41.5 million"},
    {"id": "ceo", "question": "Who is the chief executive of Alpha?", "expected": "Ann Smith"},
    {"id": "survey", "question": "How many adults did the Beta survey interview by cellphone?"},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        make_pdf(root / "alpha.pdf", "alpha.pdf", 10)
        make_pdf(root / "surveys" / "beta.pdf", "beta.pdf", 8)
        questions = Path(tmp) / "questions.jsonl"
        questions.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
        out = Path(tmp) / "out"
        with FakeVLLM([], default=scripted, model=MODEL, require_schema=False) as server:
            judge = OpenAICompatible(model=MODEL, api_base=server.url, multimodal=False)
            compare(
                root,
                questions,
                out,
                engines=["docmemo", "stock"],
                llm=llm(server),
                judge_llm=judge,
                pages=args.pages,
                progress=False,
            )
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for engine in ("docmemo", "stock"):
        mine = [r for r in rows if r["engine"] == engine]
        mean = {
            k: sum(r.get(k, 0) for r in mine) / len(mine)
            for k in ("llm_calls", "prompt_tokens", "images", "image_tokens")
        }
        print(
            f"{engine}: {len(mine)} questions; per question {mean['llm_calls']:.2f} LLM calls, "
            f"{mean['prompt_tokens']:.0f} prompt tokens (server), {mean['images']:.1f} images, "
            f"{mean['image_tokens']:.0f} image tokens (estimate)"
        )


if __name__ == "__main__":
    main()
