"""The runnable fenced blocks of the Markdown docs, so a test can execute every one of them.

A block is runnable when its fence names Python (``python``, ``py``) or a shell (``bash``,
``console``, ``sh``, ``shell``); ``text`` and the rest are pictures or synopses. A block that
cannot run where the tests run (a GPU, a real key, a pip install, hours of indexing) is marked
by an HTML comment on the line right before its fence, which the rendered page does not show::

    <!-- skip: needs a GPU and vLLM -->

Pure text in, blocks out: no files are read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RUNNABLE = {"python": "python", "py": "python", "bash": "shell", "console": "shell"}
RUNNABLE |= {"sh": "shell", "shell": "shell"}

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One runnable fenced block: where it is, what runs it, its code, why it is skipped."""

    source: str
    line: int  # 1-based line of the opening fence
    kind: str  # "python" | "shell"
    code: str
    skip: str | None = None

    @property
    def name(self) -> str:
        """A stable test id: file and line of the opening fence."""
        return f"{self.source}:{self.line}"


def runnable_blocks(text: str, source: str) -> list[Block]:
    """The Python and shell blocks of the Markdown ``text`` of file ``source``, in order.

    Raises:
        ValueError: a fence is left open, or a skip comment has no block right after it
            (a marker that silently skips nothing, or the wrong block, is a defect).
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        skip = _SKIP.match(lines[index])
        if skip is not None:
            following = _FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
            info = following.group("info").strip().split() if following else []
            if not info or info[0].lower() not in RUNNABLE:
                raise ValueError(
                    f"{source}:{index + 1}: skip comment not followed by a python/shell block"
                )
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise ValueError(f"{source}:{index + 1}: fence {fence} is never closed")
        info = opening.group("info").strip().split()
        kind = RUNNABLE.get(info[0].lower()) if info else None
        if kind is not None:
            previous = _SKIP.match(lines[index - 1]) if index > 0 else None
            body = [
                line[indent:] if line[:indent].isspace() else line
                for line in lines[index + 1 : end]
            ]
            blocks.append(
                Block(
                    source=source,
                    line=index + 1,
                    kind=kind,
                    code="\n".join(body) + "\n",
                    skip=previous.group("reason") if previous else None,
                )
            )
        index = end + 1
    return blocks
