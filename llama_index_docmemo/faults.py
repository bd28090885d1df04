"""Named points in the write path where crash and fault tests inject failures.

The store and the indexer call :func:`fault_point` at each step of a write. Nothing happens
there unless a test has installed a hook with :func:`set_fault_hook` in that process (the crash
tests' subprocess worker and the Ray fault tests' worker setup do it themselves): no variable
in the environment can make the library kill or fail itself. Without a hook a fault point costs
one global read.
"""

from __future__ import annotations

from collections.abc import Callable

FaultHook = Callable[[str], None]
"""Called with the step's name; it may kill the process or raise (e.g. an OSError)."""

STEPS: tuple[str, ...] = (
    "store-created",  # a new embedded store's folder exists, before its store record is written
    "batch-encoded",  # one batch of a document's pages is encoded, nothing of it is stored yet
    "journal-written",  # the note saying which document revision is coming is stored
    "pages-partial",  # the first batch of the new revision's pages is written
    "pages-written",  # every page of the new revision is written, the record still names the old
    "record-written",  # the document record names the new revision (the commit point)
    "stale-deleted",  # the old revision's pages are deleted, the journal note is still there
    "document-indexed",  # one document is complete, before the next one of the batch starts
)

_hook: FaultHook | None = None


def set_fault_hook(hook: FaultHook | None) -> FaultHook | None:
    """Install ``hook`` for this process (None removes it); returns the previous one."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def fault_point(step: str) -> None:
    """Run the installed hook, if any, at the write step ``step`` (one of :data:`STEPS`)."""
    if _hook is not None:
        _hook(step)
