"""Free-space checks of the embedded store, made before the engine touches the disk.

Qdrant Edge writes through memory maps: a write into a full disk does not fail, it kills the
process with SIGBUS (exit 135, no message). Opening writes too (tracker journals, deletion
flags, and the replay of a write-ahead log left by a crashed run), so opening, creating and
every write first check the disk and refuse with a message instead. Measured on tmpfs
(``integration_tests/test_disk_full.py``): a cleanly closed store opens with 4 KiB free, a store
left by a crash with 100 unflushed pages wrote 376 KiB while opening and died by SIGBUS with
256 KiB free; log segments (``wal/open-N``) are 32 MiB files, allocated as they fill.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from llama_index_docmemo.errors import StoreError

FLOOR_BYTES = 32 << 20
"""Kept free under any setting: one log segment, far above what opening writes (see above)."""
DEFAULT_MARGIN_BYTES = 256 << 20
"""Kept free by default beyond a page write's own size: a write never dies halfway."""
MIN_FREE_ENV = "DOCMEMO_MIN_FREE_MB"
SPACE_FACTOR = 3
"""A page write is counted this many times: the log, the segment, the payload indexes."""


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def write_margin() -> int:
    """Bytes page writes keep free: ``$DOCMEMO_MIN_FREE_MB`` (default 256), never under the floor."""
    setting = os.environ.get(MIN_FREE_ENV, "").strip()
    if not setting:
        return DEFAULT_MARGIN_BYTES
    try:
        margin = int(float(setting) * (1 << 20))
    except ValueError:
        margin = -1
    if margin < 0:
        raise StoreError(f"${MIN_FREE_ENV}={setting!r} is not a number of MiB (e.g. 256)")
    return max(margin, FLOOR_BYTES)


def log_bytes(path: Path) -> int:
    """Bytes the store's write-ahead log occupies (its files are sparse): what opening may replay."""
    log = path / "wal"
    if not log.is_dir():
        return 0
    return sum(f.stat().st_blocks * 512 for f in log.iterdir() if f.is_file())


def _existing(path: Path) -> Path:
    """``path``, or its nearest existing parent (a store about to be created)."""
    folder = path.absolute()
    while not folder.exists():
        folder = folder.parent
    return folder


def require_free(path: Path, what: str, needed: int, parts: str) -> None:
    """Raise a 'disk is full' StoreError naming ``path`` unless its disk has ``needed`` bytes free.

    ``parts`` says what the need is made of, so the message tells how much to free and why.
    """
    free = shutil.disk_usage(_existing(path)).free
    if free < needed:
        raise StoreError(
            f"cannot {what} page store {path}: No space left on device (the disk is full: "
            f"{_mib(free)} free, {_mib(needed)} needed: {parts}; the engine would die by "
            f"SIGBUS writing into a full disk): free at least {-(-(needed - free) >> 20)} MiB "
            "more on that disk and run the command again; nothing stored is lost"
        )


MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
"""File systems where reading a hole of a mapped file allocates it: there, opening a store fills
the holes of its memory-mapped segment files (``cp -r`` copies them sparse). Measured with
qdrant-edge-py 0.9.0: a 24-page store copied with ``cp -r`` onto tmpfs takes 1.1 MiB, and
195 MiB once opened: every hole of the vector storages and payload indexes filled, none of
the files read without a map (``READ_NOT_MAPPED``) or of the log; 12 KiB on ext4/overlay."""
READ_NOT_MAPPED = frozenset({"payload_storage", "store"})
"""Folders of segment files the engine reads without mapping them (their holes stay holes)."""


def filesystem_type(path: Path) -> str:
    """The type of the file system holding ``path`` ("" when unknown: no /proc/self/mounts)."""
    target = os.path.realpath(_existing(path))
    best, kind = "", ""
    try:
        lines = Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def hole_bytes(path: Path) -> int:
    """Bytes of the holes of the store's mapped segment files (size less what they occupy)."""
    segments = path / "segments"
    if not segments.is_dir():
        return 0
    total = 0
    for file in segments.rglob("*"):
        if file.is_file() and not READ_NOT_MAPPED.intersection(file.relative_to(segments).parts):
            stat = file.stat()
            total += max(stat.st_size - stat.st_blocks * 512, 0)
    return total


def check_open(path: Path, what: str = "open") -> None:
    """Opening (or creating) maps the store and writes to it: the floor plus the log to replay,
    plus, on a memory file system, the holes of its segment files (see MEMORY_FILESYSTEMS)."""
    log = log_bytes(path)
    holes = hole_bytes(path) if filesystem_type(path) in MEMORY_FILESYSTEMS else 0
    filled = f" + {_mib(holes)} of sparse segment files a memory file system fills" * bool(holes)
    require_free(
        path,
        what,
        FLOOR_BYTES + log + holes,
        f"{_mib(FLOOR_BYTES)} kept free under any setting + {_mib(log)} of write-ahead log "
        f"to replay{filled}",
    )


def check_write(path: Path, data_bytes: int = 0) -> None:
    """A write of pages (``data_bytes`` > 0: the margin and the pages) or of a small change
    (a delete, a payload or index change: the floor)."""
    if data_bytes <= 0:
        require_free(path, "write to", FLOOR_BYTES, f"{_mib(FLOOR_BYTES)} kept free")
        return
    margin = write_margin()
    pages = SPACE_FACTOR * data_bytes
    require_free(
        path,
        "write to",
        margin + pages,
        f"{_mib(margin)} kept free (${MIN_FREE_ENV}, never under {_mib(FLOOR_BYTES)}) + "
        f"{_mib(pages)} for the pages",
    )
