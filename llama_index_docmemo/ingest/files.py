"""Which files a batch indexes, and under which doc ids: folders walked, nothing opened.

A doc id is the file's path relative to the folder it was found in (``pdfs/2023/10k.pdf``
indexed as ``pdfs/`` is ``2023/10k.pdf``), or to an explicit root. Symlinks inside folders are
never followed; FIFOs, devices and unreadable files are named, never read (a FIFO would block).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceFile:
    """A file to index and the doc id it is stored under (its path relative to its root)."""

    path: Path
    doc_id: str


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def regular_file_problem(path: Path, *, follow: bool = True) -> str | None:
    """Why ``path`` cannot be read as a file (checked before any read: a FIFO would block)."""
    try:
        info = path.stat() if follow else path.lstat()
    except FileNotFoundError:
        return "no such file or folder" if not path.is_symlink() else "broken symlink"
    except OSError as exc:
        return f"cannot read the file: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file: {_kind(info.st_mode)}"
    if not os.access(path, os.R_OK):
        return "cannot read the file: permission denied"
    return None


def _relative_id(path: Path, root: Path) -> str | None:
    try:
        return path.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:
        return None


def expand_paths(
    paths: Iterable[str | os.PathLike[str]], *, root: str | os.PathLike[str] | None = None
) -> tuple[list[SourceFile], list[tuple[str, str]], list[tuple[str, str]]]:
    """Files to index with their doc ids, from files and folders (``*.pdf``, recursive).

    Doc ids are paths relative to ``root`` when given; else a folder's files are relative to that
    folder and the files given one by one relative to their common parent folder (a single file:
    its name). Symlinks inside folders are not followed (named in ``skipped``); FIFOs, devices,
    unreadable files and missing paths are named in ``failed``; nothing is opened here.

    Returns:
        (files, failed, skipped) with ``failed``/``skipped`` as (path, reason) pairs.
    """
    found: list[tuple[Path, Path | None]] = []  # (file, folder it was found in)
    failed: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [(file, path) for file in _walk(path, failed, skipped)]
            continue
        problem = regular_file_problem(path)
        if problem is not None:
            failed.append((str(path), problem))
        else:
            found.append((path, None))
    loose = [file for file, folder in found if folder is None]
    common = Path(os.path.commonpath([str(f.absolute().parent) for f in loose])) if loose else None
    files: list[SourceFile] = []
    seen: set[Path] = set()
    for file, folder in found:
        key = file.resolve()
        if key in seen:
            continue
        seen.add(key)
        base = Path(root) if root is not None else (folder or common or file.parent)
        doc_id = _relative_id(file, base)
        if doc_id is None:
            failed.append((str(file), f"outside the indexed root {base}"))
            continue
        files.append(SourceFile(file, doc_id))
    return files, failed, skipped


def _walk(
    folder: Path, failed: list[tuple[str, str]], skipped: list[tuple[str, str]]
) -> list[Path]:
    """``*.pdf`` files under ``folder`` (sorted), never following symlinks."""

    def unreadable(exc: OSError) -> None:
        failed.append((str(exc.filename or folder), f"cannot list the folder: {exc.strerror}"))

    files: list[Path] = []
    for top, dirs, names in os.walk(folder, onerror=unreadable):
        base = Path(top)
        for name in sorted(dirs):
            if (base / name).is_symlink():
                skipped.append((str(base / name), "symlink to a folder, not followed"))
        dirs.sort()
        for name in sorted(names):
            path = base / name
            if path.suffix.lower() != ".pdf":
                continue
            if path.is_symlink():
                skipped.append((str(path), "symlink, not followed (pass its target explicitly)"))
                continue
            problem = regular_file_problem(path, follow=False)
            if problem is not None:
                failed.append((str(path), problem))
            else:
                files.append(path)
    return files
