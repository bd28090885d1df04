"""Soak: many queries on one engine with the offline reader; memory and open files over time.

Usage:
    python benchmarks/soak.py [--queries 1000] [--every 50] [--warmup 100]
        [--store COPY_OF_A_STORE] [--tracemalloc] [--out FILE.md]

Without ``--store`` the demo report is indexed into a temporary store. With ``--store`` (a copy:
an embedded store has one owner) questions run over every document in it. Every ``--every``
queries it samples the resident set size (VmRSS), Python's traced heap (``--tracemalloc``), open
file descriptors and threads (Linux /proc). The report gives each series' least-squares slope
after the warm-up, per 1,000 queries, and the samples; a flat engine shows slopes near zero
(a few hundred KiB per 1,000 queries is allocator noise at these sizes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path

from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf
from llama_index_docmemo.encoders import default_encoder
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.store import open_store

VARIANTS = ("", " in total", " exactly", " according to the report", " and why")


@dataclass
class Sample:
    queries: int
    seconds: float
    rss_kib: int
    traced_kib: int | None
    open_files: int
    threads: int


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def threads() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def sample(queries: int, started: float, traced: bool) -> Sample:
    gc.collect()
    return Sample(
        queries=queries,
        seconds=round(time.perf_counter() - started, 2),
        rss_kib=rss_kib(),
        traced_kib=tracemalloc.get_traced_memory()[0] // 1024 if traced else None,
        open_files=len(os.listdir("/proc/self/fd")),
        threads=threads(),
    )


def slope_per_1000(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs, per 1,000 units of x."""
    n = len(xs)
    if n < 2:
        return 0.0
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    cov = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return 1000.0 * cov / var if var else 0.0


def questions() -> list[str]:
    base = [q.question.rstrip("?") for q in DEMO_QUESTIONS]
    return [f"{q}{v}?" for v in VARIANTS for q in base]


def run(args: argparse.Namespace, store_path: Path) -> dict:
    encoder = default_encoder()
    with open_store(store_path, encoder=encoder) as store:
        engine = DocMemoQueryEngine.from_defaults(store=store, encoder=encoder)
        asked = questions()
        if args.tracemalloc:
            tracemalloc.start()
        started = time.perf_counter()
        samples = [sample(0, started, args.tracemalloc)]
        for i in range(1, args.queries + 1):
            engine.query(asked[i % len(asked)])
            if i % args.every == 0 or i == args.queries:
                samples.append(sample(i, started, args.tracemalloc))
        if args.tracemalloc:
            tracemalloc.stop()
    steady = [s for s in samples if s.queries >= args.warmup]
    xs = [float(s.queries) for s in steady]
    slopes = {
        "rss_kib": slope_per_1000(xs, [s.rss_kib for s in steady]),
        "open_files": slope_per_1000(xs, [s.open_files for s in steady]),
        "threads": slope_per_1000(xs, [s.threads for s in steady]),
    }
    if args.tracemalloc:
        slopes["traced_kib"] = slope_per_1000(xs, [s.traced_kib or 0 for s in steady])
    return {
        "queries": args.queries,
        "warmup": args.warmup,
        "seconds": samples[-1].seconds,
        "slope_per_1000_queries": {k: round(v, 2) for k, v in slopes.items()},
        "samples": [asdict(s) for s in samples],
    }


def markdown(result: dict, command: str) -> str:
    lines = [
        "# Soak: one engine, offline reader",
        "",
        f"Command: `{command}`",
        "",
        f"{result['queries']} queries in {result['seconds']:.0f} s; slopes after the first "
        f"{result['warmup']} queries (least squares, per 1,000 queries):",
        "",
        "| series | slope / 1,000 queries |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:+.2f} |" for k, v in result["slope_per_1000_queries"].items()]
    lines += [
        "",
        "| queries | s | RSS KiB | traced KiB | open files | threads |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {s['queries']} | {s['seconds']} | {s['rss_kib']} | {s['traced_kib']} | "
        f"{s['open_files']} | {s['threads']} |"
        for s in result["samples"]
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--store", type=Path, default=None, help="a copy of a store to query")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python's heap")
    parser.add_argument("--out", type=Path, default=None, help="Markdown report (+ .json beside)")
    args = parser.parse_args()
    command = "python benchmarks/soak.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" if not isinstance(v, bool) else f"--{k}"
        for k, v in vars(args).items()
        if v not in (None, False)
    )
    with tempfile.TemporaryDirectory() as tmp:
        store_path = args.store
        if store_path is None:
            store_path = Path(tmp) / "store"
            pdf = write_demo_pdf(Path(tmp) / "docs" / "report.pdf")
            encoder = default_encoder()
            with open_store(store_path, encoder=encoder) as store:
                DocumentIndexer(store, encoder).index_paths([pdf])
        result = run(args, store_path)
    text = markdown(result, command)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
