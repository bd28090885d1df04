"""The event loop's longest stall under N concurrent ``aquery`` calls, beside a bare-loop control.

The set-up of ``integration_tests/test_async_nonblocking.py``: a real embedded store (the demo
report and a generated report of tables, the CPU encoder), ``QwenVL`` over HTTP to the scripted
OpenAI-compatible server in a process of its own, page images, crops and evidence images on every
round. A heartbeat every 10 ms on the engine's loop measures the longest gap; at the same time a
second process runs a bare event loop with the same heartbeat and nothing else (the control: what
the machine alone costs a loop, other processes and the scheduler). Both are reported per run,
with the gap's 99th percentile; the heap is frozen after start-up (``gc.freeze()``, as
docs/python.md advises) unless ``--no-freeze``. ``--processes N`` gives the engine a process
pool of N for its GIL-holding work (PyMuPDF renders and layout analysis) instead of its default
thread (``llama_index_docmemo/step_runtime.py``).

Usage: PYTHONPATH=<checkout>:<checkout>/integration_tests \\
    python benchmarks/query_stall.py [--queries 32] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from crops_pdfs import make_report_pdf
from test_async_nonblocking import MODEL, scripted_server

from llama_index_docmemo import DocMemoConfig, DocMemoQueryEngine, QwenVL, default_encoder
from llama_index_docmemo.demo.document import DEMO_QUESTIONS, write_demo_pdf
from llama_index_docmemo.indexing import DocumentIndexer
from llama_index_docmemo.store import open_store

TICK = 0.010
CONTROL = f"""
import asyncio, json, sys, threading, time
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
async def main():
    gaps, last = [], time.perf_counter()
    print("ready", flush=True)
    while not stop.is_set():
        await asyncio.sleep({TICK})
        now = time.perf_counter()
        gaps.append(now - last - {TICK})
        last = now
    print(json.dumps(gaps))
asyncio.run(main())
"""


def summary(gaps: list[float]) -> dict[str, float]:
    ordered = sorted(gaps)
    return {
        "max_ms": round(1000 * ordered[-1], 1),
        "p99_ms": round(1000 * ordered[int(0.99 * (len(ordered) - 1))], 1),
    }


async def one_run(eng, questions: list[str]) -> tuple[list[float], float, int]:  # noqa: ANN001
    """Heartbeat gaps on this loop while ``questions`` run at once; seconds; answers."""
    stop, gaps = asyncio.Event(), []

    async def beat() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            gaps.append(now - last - TICK)
            last = now

    ticker = asyncio.create_task(beat())
    started = time.perf_counter()
    responses = await asyncio.gather(*(eng.aquery(q) for q in questions))
    took = time.perf_counter() - started
    stop.set()
    await ticker
    return gaps, took, sum(str(r) == "1,184" for r in responses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-freeze", action="store_true")
    parser.add_argument("--processes", type=int, default=0, help="a process pool of N (0: none)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name, scripted_server() as url:
        tmp = Path(tmp_name)
        write_demo_pdf(tmp / "docs" / "report.pdf")
        make_report_pdf(tmp / "docs" / "tables.pdf")
        encoder = default_encoder()
        store = open_store(path=tmp / "store", encoder=encoder)
        DocumentIndexer(store, encoder, ocr=False).index_paths([tmp / "docs"])
        questions = [DEMO_QUESTIONS[i % len(DEMO_QUESTIONS)].question for i in range(args.queries)]
        # spawned, not forked: a forked worker would hold the helper processes' pipes open
        spawn = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(args.processes, mp_context=spawn) if args.processes else None
        eng = DocMemoQueryEngine.from_defaults(
            store=store,
            encoder=encoder,
            llm=QwenVL(model=MODEL, api_base=url, timeout=30, max_retries=1),
            config=DocMemoConfig(rounds=2, pages_per_round=3, candidates=20),
            cache_dir=tmp / "cache",
            cpu_executor=pool,
        )
        if not args.no_freeze:
            gc.collect()
            gc.freeze()
        for run in range(1, args.runs + 1):
            control = subprocess.Popen(
                [sys.executable, "-c", CONTROL],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert control.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
            gaps, took, answered = asyncio.run(one_run(eng, questions))
            out, _ = control.communicate("", timeout=60)
            row = {
                "run": run,
                "queries": args.queries,
                "processes": args.processes,
                "answered": answered,
                "seconds": round(took, 1),
                "engine_loop": summary(gaps),
                "bare_loop_control": summary(json.loads(out.strip().splitlines()[-1])),
            }
            rows.append(row)
            print(
                f"run {run}: {args.queries} aquery in {took:.1f} s ({answered} answered); "
                f"engine loop stall max {row['engine_loop']['max_ms']} ms "
                f"(p99 {row['engine_loop']['p99_ms']}); bare loop control max "
                f"{row['bare_loop_control']['max_ms']} ms (p99 "
                f"{row['bare_loop_control']['p99_ms']})",
                flush=True,
            )
        store.close()
        if pool is not None:
            pool.shutdown()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
