"""The text part of a reader request, in tokens: what ``evaluation.cost`` prices a request and a page at.

For the first questions of a dataset's tuning half, builds the reader's request exactly as
:class:`~llama_index_docmemo.readers.vlm.VLMReader` does at its defaults (system prompt,
question, the document's outline, ``k`` pages of the first-round ranking with their extracted
text, the reply form), without images, and counts its tokens with LlamaIndex's tokenizer. Prints
the mean tokens of a request with no page and the mean extra tokens of one page's text; a
page's image is priced separately (``evaluation.cost.PAGE_IMAGE_TOKENS``).

    python benchmarks/request_tokens.py --data ../shared/data/mmlongbench-doc --store STORE
"""

from __future__ import annotations

import argparse
import statistics

from llama_index.core.utils import get_tokenizer

from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.evaluation.baselines import FirstRoundRanking
from llama_index_docmemo.evaluation.datasets import load_dataset, select_split
from llama_index_docmemo.evaluation.setup import open_eval_store
from llama_index_docmemo.memory.schema import SchemaMemory
from llama_index_docmemo.readers.base import PageView, ReaderInput
from llama_index_docmemo.readers.prompts import (
    READER_SYSTEM_PROMPT,
    page_text_budget,
    reading_prompt,
)

TEXT_CHARS, MAX_PAGE_CHARS, MIN_PAGE_CHARS = 24000, 6000, 800  # VLMReader's defaults


def request_tokens(inp: ReaderInput, count: object) -> int:
    """Tokens of the system prompt and the text parts of one reading request."""
    chars = page_text_budget(len(inp.pages), TEXT_CHARS, MAX_PAGE_CHARS, MIN_PAGE_CHARS)
    parts = reading_prompt(inp, set(range(len(inp.pages))), set(), page_chars=chars)
    text = READER_SYSTEM_PROMPT.format() + "".join(p for p in parts if isinstance(p, str))
    return len(count(text))  # type: ignore[operator]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    dataset = select_split(load_dataset(args.data), "tune")
    store, encoder = open_eval_store(args.store)
    ranking = FirstRoundRanking(store, encoder, DocMemoConfig())
    count = get_tokenizer()
    empty, per_page = [], []
    try:
        for item in dataset.items[: args.questions]:
            schema = store.get_schema(item.doc_id)
            memory = SchemaMemory()
            if schema is not None:
                memory.add(schema)
            pages = [
                PageView(ref=r.ref, text=r.text, section=r.section)
                for r in ranking.records(item, args.k)[: args.k]
            ]
            base = ReaderInput(
                question=item.question, query=item.question, pages=[], outline=memory.describe()
            )
            full = ReaderInput(
                question=item.question, query=item.question, pages=pages, outline=memory.describe()
            )
            none = request_tokens(base, count)
            empty.append(none)
            per_page.append((request_tokens(full, count) - none) / max(1, len(pages)))
    finally:
        store.close()
    print(
        f"{dataset.name}: {len(empty)} questions; a request without pages "
        f"{statistics.mean(empty):.0f} tokens (median {statistics.median(empty):.0f}); "
        f"one page's text {statistics.mean(per_page):.0f} tokens "
        f"(median {statistics.median(per_page):.0f}) at k={args.k}"
    )


if __name__ == "__main__":
    main()
