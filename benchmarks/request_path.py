"""The package modules one reading request crosses, from the reader to the HTTP transport.

One reading round of :class:`~llama_index_docmemo.readers.vlm.VLMReader` over
:class:`~llama_index_docmemo.OpenAICompatible` runs against the scripted OpenAI-protocol server of
``integration_tests/fake_vllm_server.py``, under a profile hook (``sys.setprofile``, every
thread). When the request reaches ``httpx``'s own transport, the hook reads the call stack and
keeps its ``llama_index_docmemo`` modules: the request's path. The stack is read as the code
reads: a step suspended in the steps runtime (``step_runtime.run``/``arun`` drive generators that
yield their I/O) counts as the caller of the call it yielded, and a thread, a pool's work item or
an asyncio task counts as called by the code that started it. The runtime itself
(``step_runtime``) drives every step of the package and is not counted.

``--all`` also lists every module of ``llms/`` and ``readers/`` whose code ran during the
round (helpers called on the side: prompts, the context fit, the reply's checks).

Usage: PYTHONPATH=<checkout> python benchmarks/request_path.py [--async] [--all]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from collections.abc import Callable
from concurrent.futures import thread as pool_thread
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration_tests"))

PACKAGE = "llama_index_docmemo"
RUNTIME = frozenset({f"{PACKAGE}.step_runtime"})
"""Modules that drive every step of the package (not part of any one request's path)."""
READER_FOLDERS = (f"{PACKAGE}.llms.", f"{PACKAGE}.readers.")
SEND = frozenset(
    {
        httpx.HTTPTransport.handle_request.__code__,
        httpx.AsyncHTTPTransport.handle_async_request.__code__,
    }
)
T = TypeVar("T")


class PathRecorder:
    """A profile hook recording the package modules on the logical stack at each send."""

    def __init__(self) -> None:
        self.paths: list[list[str]] = []
        self.ran: set[str] = set()
        self._origins: dict[int, list[str]] = {}  # thread, work item, coroutine frame -> stack
        self._keep: list[Any] = []  # the objects keyed by id stay alive while recording
        self._sent: list[FrameType] = []

    def logical_stack(self, frame: FrameType | None) -> list[str]:
        """The package modules from the outermost caller down to ``frame`` (duplicates kept)."""
        modules: list[str] = []
        while frame is not None:
            modules.append(frame.f_globals.get("__name__", ""))
            steps = frame.f_locals.get("steps") if frame.f_code.co_name in ("run", "arun") else None
            suspended: list[str] = []
            while hasattr(steps, "gi_frame") and steps.gi_frame is not None:
                suspended.append(steps.gi_frame.f_globals.get("__name__", ""))
                steps = steps.gi_yieldfrom
            modules.extend(reversed(suspended))
            origin = self._origin(frame)
            if origin is not None:
                modules.extend(reversed(origin))
                break
            frame = frame.f_back
        return [m for m in reversed(modules) if m.startswith(f"{PACKAGE}.")]

    def _origin(self, frame: FrameType) -> list[str] | None:
        """The stack of the code that started ``frame``'s thread, work item or task (None: the
        frame's caller is its ``f_back``)."""
        if frame.f_code.co_name in ("run", "_bootstrap"):  # a thread's or a work item's
            owner = frame.f_locals.get("self")
            if owner is not None and id(owner) in self._origins:
                return self._origins[id(owner)]
        return self._origins.get(id(frame))  # a task's coroutine

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if name.startswith(READER_FOLDERS):
            self.ran.add(name)
        code = frame.f_code
        if code in SEND and not any(f is frame for f in self._sent):  # not a coroutine's resume
            self._sent.append(frame)
            self.paths.append(self.logical_stack(frame.f_back))
        elif (
            code is threading.Thread.start.__code__
            or code is pool_thread._WorkItem.__init__.__code__
        ):
            owner = frame.f_locals["self"]
            self._keep.append(owner)
            self._origins[id(owner)] = self.logical_stack(frame.f_back)
        elif code is asyncio.ensure_future.__code__ or code.co_name == "create_task":
            coroutine = frame.f_locals.get("coro_or_future", frame.f_locals.get("coro"))
            inner = getattr(coroutine, "cr_frame", None)
            if inner is not None:
                self._keep.append(coroutine)
                self._origins[id(inner)] = self.logical_stack(frame.f_back)


def recorded(fn: Callable[[], T]) -> tuple[T, PathRecorder]:
    """``fn()`` run under a :class:`PathRecorder` (every thread)."""
    recorder = PathRecorder()
    threading.setprofile(recorder)
    sys.setprofile(recorder)
    try:
        return fn(), recorder
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def distinct(modules: list[str]) -> list[str]:
    """``modules`` without the runtime, each once, in order of first appearance."""
    return list(dict.fromkeys(m for m in modules if m not in RUNTIME))


def reading_path(use_async: bool = False) -> tuple[list[str], list[str]]:
    """(the modules one reading request crosses, every reader module whose code ran)."""
    from fake_vllm_server import FakeVLLM
    from scripted_replies import answer

    from llama_index_docmemo import OpenAICompatible
    from llama_index_docmemo.readers.base import PageView, ReaderInput
    from llama_index_docmemo.readers.vlm import VLMReader
    from llama_index_docmemo.types import PageRef

    page = PageView(PageRef("report.pdf", 1), "Revenue in 2023 was $5.2M.")
    reading = ReaderInput(question="What was revenue?", query="revenue", pages=[page])
    with FakeVLLM(default=answer) as server:
        llm = OpenAICompatible(
            model=server.model, api_base=server.url, context_window=8192, max_retries=0
        )
        reader = VLMReader(llm)
        reader.read(reading)  # the first request also reads the server's model list
        if use_async:
            feedback, recorder = recorded(lambda: asyncio.run(reader.aread(reading)))
        else:
            feedback, recorder = recorded(lambda: reader.read(reading))
    if feedback.status != "answered" or len(recorder.paths) != 1:
        raise RuntimeError(f"one answered request expected: {feedback}, {recorder.paths}")
    path = recorder.paths[0]
    start = path.index(type(reader).__module__)  # from the reader's call on
    return distinct(path[start:]), sorted(recorder.ran)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    path, ran = reading_path(args.use_async)
    print(f"{len(path)} modules on the request's path: " + " -> ".join(path))
    if args.all:
        print(f"{len(ran)} modules of llms/ and readers/ ran:")
        print("\n".join(f"  {m}" for m in ran))


if __name__ == "__main__":
    main()
