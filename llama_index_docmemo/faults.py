"""Failure injection for crash and fault tests: ``DOCMEMO_FAULT=<step>[:<action>]``.

The store and the indexer call :func:`fault_point` at each step of a write. When the variable
names that step, the process is killed there (``kill``, the default: SIGKILL, no cleanup, as a
power cut or the OOM killer would) or the step fails with an OS error (``enospc``: disk full,
``erofs``: read-only file system). Unset (always, outside tests) it costs one dict lookup.
"""

from __future__ import annotations

import errno
import os
import signal

FAULT_ENV = "DOCMEMO_FAULT"

STEPS: tuple[str, ...] = (
    "store-created",  # a new embedded store's folder exists, before its store record is written
    "journal-written",  # the note saying which document revision is coming is stored
    "pages-partial",  # the first batch of the new revision's pages is written
    "pages-written",  # every page of the new revision is written, the record still names the old
    "record-written",  # the document record names the new revision (the commit point)
    "stale-deleted",  # the old revision's pages are deleted, the journal note is still there
    "document-indexed",  # one document is complete, before the next one of the batch starts
)

_ERRORS = {
    "enospc": (errno.ENOSPC, "No space left on device"),
    "erofs": (errno.EROFS, "Read-only file system"),
}


def fault_point(step: str) -> None:
    """Kill the process or raise an OSError here if ``$DOCMEMO_FAULT`` names ``step``."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    name, _, action = spec.partition(":")
    if name != step:
        return
    if action in ("", "kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    code, message = _ERRORS.get(action, (errno.EIO, "Input/output error"))
    raise OSError(code, f"{message} (injected at {step} by ${FAULT_ENV})")
