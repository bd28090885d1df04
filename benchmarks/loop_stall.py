"""What stalls an asyncio event loop: PyMuPDF work off the loop, and full garbage collections.

``work`` (the numbers behind ``llama_index_docmemo/step_runtime.py``'s CPU thread): renders pages at the reader's image
size, or analyses their layout (the crop postprocessor's detection), a few at a time, on one
thread, on two, or on asyncio's default pool, while a 5 ms heartbeat on the loop measures the
longest gap. PyMuPDF holds the GIL, so the executor decides how long the loop waits.

    python benchmarks/loop_stall.py work --data ../shared/data --pages 24 --concurrency 8

``gc`` (the numbers behind the README's advice to call ``gc.freeze()``): live objects and the
time of one full collection after importing each set of modules, each in a fresh process.

    python benchmarks/loop_stall.py gc
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import subprocess
import sys
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

IMPORTS = [
    "json",
    "llama_index.core",
    "llama_index.core, openai",
    "llama_index_docmemo.query_engine",
]


def pages_of(data: Path, count: int, seed: int) -> list[tuple[str, int]]:
    """``count`` random (pdf, page) of the development sets' PDFs under ``data``."""
    import pymupdf

    pdfs = sorted(data.rglob("*.pdf"))
    if not pdfs:
        raise SystemExit(f"no PDF under {data}")
    rng = random.Random(seed)
    chosen = []
    for _ in range(count):
        pdf = rng.choice(pdfs)
        with pymupdf.open(pdf) as doc:
            chosen.append((str(pdf), rng.randint(1, doc.page_count)))
    return chosen


def one_page(kind: str, pdf: str, page: int, cache: Path) -> float:
    """Seconds to render one page as the reader sees it, or to detect its layout (uncached)."""
    from llama_index_docmemo.ingest.layout import detect_layout_pymupdf
    from llama_index_docmemo.ingest.pdf import render_page

    started = time.perf_counter()
    if kind == "render":
        render_page(pdf, page, 1500).save(cache / "page.png", format="PNG")
    else:
        detect_layout_pymupdf(pdf, page)  # what the crop postprocessor runs on a layout-cache miss
    return time.perf_counter() - started


async def stall(
    kind: str, jobs: list[tuple[str, int]], executor: Executor | None, concurrency: int, cache: Path
) -> dict[str, float]:
    """The longest heartbeat gap while ``jobs`` run ``concurrency`` at a time on ``executor``."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    stop = asyncio.Event()

    async def beat() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last - 0.005)
            last = now

    async def chain(part: list[tuple[str, int]]) -> list[float]:
        return [
            await loop.run_in_executor(executor, one_page, kind, pdf, page, cache)
            for pdf, page in part
        ]

    heartbeat = asyncio.create_task(beat())
    calls = await asyncio.gather(*(chain(jobs[i::concurrency]) for i in range(concurrency)))
    stop.set()
    await heartbeat
    durations = [d for part in calls for d in part]
    return {
        "mean_call_ms": 1000 * sum(durations) / len(durations),
        "max_loop_gap_ms": 1000 * max(gaps),
    }


def cmd_work(args: argparse.Namespace) -> None:
    jobs = pages_of(args.data, args.pages, args.seed)
    cache = args.cache
    cache.mkdir(parents=True, exist_ok=True)
    for kind in ("render", "layout"):  # imports and first-use work, before anything is timed
        one_page(kind, *jobs[0], cache)
    gc.collect()
    gc.freeze()  # the stall measured is the executor's, not a collection's
    rows = []
    for kind in ("render", "layout"):
        for name, executor in (
            ("one thread", ThreadPoolExecutor(1)),
            ("two threads", ThreadPoolExecutor(2)),
            ("asyncio default pool", None),
        ):
            result = asyncio.run(stall(kind, jobs, executor, args.concurrency, cache))
            rows.append({"work": kind, "executor": name, **result})
            print(
                f"{kind:7} {name:21} call {result['mean_call_ms']:6.0f} ms   "
                f"longest loop gap {result['max_loop_gap_ms']:5.0f} ms",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


GC_PROBE = """
import gc, json, sys, time
exec("import " + sys.argv[1])
started = time.perf_counter()
gc.collect()
print(json.dumps({"objects": len(gc.get_objects()), "ms": 1000 * (time.perf_counter() - started)}))
"""


def cmd_gc(args: argparse.Namespace) -> None:
    for modules in IMPORTS:
        done = subprocess.run(
            [sys.executable, "-c", GC_PROBE, modules], capture_output=True, text=True, check=True
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{modules:45} {result['objects']:8,} objects   full collection {result['ms']:5.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    work = sub.add_parser("work", help="PyMuPDF work on three executors")
    work.add_argument("--data", type=Path, required=True, help="a folder holding PDFs")
    work.add_argument("--pages", type=int, default=24)
    work.add_argument("--concurrency", type=int, default=8)
    work.add_argument("--seed", type=int, default=0)
    work.add_argument("--cache", type=Path, default=Path("/tmp/docmemo-loop-stall"))
    work.add_argument("--json", type=Path)
    work.set_defaults(func=cmd_work)
    sub.add_parser("gc", help="objects and full-collection time after imports").set_defaults(
        func=cmd_gc
    )
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
