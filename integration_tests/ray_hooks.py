"""What the Ray tests run inside Ray's worker processes: a fault plan and test encoders.

:func:`install` is the cluster's ``worker_process_setup_hook``: each worker installs a fault
hook that follows the plan file named by ``$DOCMEMO_TEST_FAULT_PLAN`` (JSON, read at every
fault point, so a test changes it between runs on one cluster):

- ``"kill_once": [step, ...]``: the first worker to reach the step dies there (SIGKILL), once
  per step (a marker file beside the plan says it happened);
- ``"poison": doc_id`` with ``"poison_step": step``: a worker dies at that step every time it
  writes that document (a document that always kills its worker).

Only test code reads that variable: the library runs nothing but an installed hook.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from safety_worker import HashEncoder

from llama_index_docmemo.faults import set_fault_hook
from llama_index_docmemo.types import PageEmbedding, PageInput

if TYPE_CHECKING:
    from llama_index_docmemo.encoders.colqwen import ColQwenEncoder

PLAN_ENV = "DOCMEMO_TEST_FAULT_PLAN"
_current = threading.local()  # the document this thread of an actor encodes and writes


def marker(plan: Path, step: str) -> Path:
    return plan.with_name(f"{plan.name}.{step}.killed")


def _follow(plan: Path, step: str) -> None:
    try:
        spec = json.loads(plan.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return
    poisoned = getattr(_current, "doc_id", None) == spec.get("poison", "")
    if poisoned and spec.get("poison_step") == step:
        os.kill(os.getpid(), signal.SIGKILL)
    if step in spec.get("kill_once", ()):
        try:
            fd = os.open(marker(plan, step), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def install() -> None:
    """Ray worker setup: follow the plan file, if the cluster was started with one."""
    path = os.environ.get(PLAN_ENV)
    if path:
        plan = Path(path)
        set_fault_hook(lambda step: _follow(plan, step))


class TrackingHashEncoder(HashEncoder):
    """:class:`HashEncoder` that notes which document its thread is on (for ``poison``)."""

    def encode_pages(self, pages: Sequence[PageInput]) -> list[PageEmbedding]:
        if pages:
            _current.doc_id = pages[0].ref.doc_id
        return super().encode_pages(pages)


def tiny_colqwen() -> ColQwenEncoder:
    """The tiny random ColQwen2.5 of ``tests/colqwen_tiny.py``: the same weights in every process."""
    from llama_index_docmemo.encoders.colqwen import ColQwenEncoder
    from tests.colqwen_tiny import tiny_model, tiny_processor

    processor = tiny_processor()
    return ColQwenEncoder.from_model(
        tiny_model(processor), processor, name="colqwen2.5-tiny", batch_size=16
    )
