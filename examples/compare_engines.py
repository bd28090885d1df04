"""Compare DocMemo with the stock LlamaIndex engine on your own PDFs, with your own LLM.

    python examples/compare_engines.py DOCS_DIR QUESTIONS_FILE OUT_DIR \\
        --llm-url http://127.0.0.1:8000/v1 --llm-model qwen2.5-vl-7b [--text-only] \\
        [--judge-url URL --judge-model NAME]

QUESTIONS_FILE is a ``.jsonl`` / ``.csv`` with a ``question`` and optionally an ``expected``
answer, or a ``.txt`` with one question a line. The app's LLM goes into ``Settings.llm``, as in
any LlamaIndex app, and every engine answers with it: DocMemo, ``stock`` (SimpleDirectoryReader
-> SentenceSplitter -> VectorStoreIndex -> RetrieverQueryEngine) and ``stock-ocr`` (the same over
the OCR'd page text, to separate the method from OCR). OUT_DIR gets ``report.html`` (answers side
by side, cited pages as thumbnails, DocMemo's belief heat-map), ``report.md`` and
``results.jsonl``; rerunning resumes. The same as ``docmemo compare --docs ... --questions ...``.
Needs ``pip install 'llama-index-docmemo[eval]'``.
"""

from __future__ import annotations

import argparse
import sys

from llama_index.core import Settings

from llama_index_docmemo import OpenAICompatible
from llama_index_docmemo.evaluation.compare import compare


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("docs")
    parser.add_argument("questions")
    parser.add_argument("out")
    parser.add_argument("--llm-url", required=True)
    parser.add_argument("--llm-model", required=True)
    parser.add_argument("--text-only", action="store_true", help="a model that reads no images")
    parser.add_argument("--judge-url")
    parser.add_argument("--judge-model")
    args = parser.parse_args(argv)
    Settings.llm = OpenAICompatible(
        model=args.llm_model, api_base=args.llm_url, multimodal=not args.text_only
    )
    judge = (
        OpenAICompatible(model=args.judge_model, api_base=args.judge_url, multimodal=False)
        if args.judge_url
        else None
    )
    report = compare(
        args.docs,
        args.questions,
        args.out,
        engines=["docmemo", "stock", "stock-ocr"],
        judge_llm=judge,
    )
    for name, totals in report["totals"]["engines"].items():
        cost = totals["cost"]
        print(
            f"{name}: correct {totals['correct']['mean']}, figures verified "
            f"{totals['figures_verified']}/{totals['figures']}, "
            f"{cost['llm_calls']['mean']:.1f} LLM calls and "
            f"{cost['prompt_tokens']['mean']:.0f} prompt tokens a question"
        )
    print(f"report: {args.out}/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
