"""Compare DocMemo with fixed-budget baselines and a stock LlamaIndex pipeline on your own documents.

    python examples/compare_engines.py DATASET_DIR [OUT_DIR]

DATASET_DIR holds ``qa.jsonl`` (one question per line with its gold evidence pages; the format is
documented in ``llama_index_docmemo/evaluation/datasets.py``) and ``pdfs/``. The PDFs are indexed once
into OUT_DIR/store; rerunning the script resumes where it stopped. With the simulated reasoner (pages
labelled from the gold evidence, 20% false negatives, 5% false positives) the numbers isolate the
retrieval state; ``--reasoner offline`` or ``vlm`` (with ``--llm-url``) measure the real reader. Same as
``docmemo eval --data DATASET_DIR --reasoner simulated --out OUT_DIR``.
"""

from __future__ import annotations

import sys

from llama_index_docmemo.evaluation.cli import main as harness


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    data, out = argv[0], argv[1] if len(argv) > 1 else "./docmemo_eval"
    return harness(
        "eval",
        [
            "--data",
            data,
            "--out",
            out,
            "--reasoner",
            "simulated",
            "--engines",
            "docmemo,static-paged,neighbours,static@15,llamaindex-topk",
        ],
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
