"""A full disk is an error, not a crash: every command on a store with almost no free space
exits with a message naming the folder and the free space, never by SIGBUS (issue 24).

Commands run in subprocesses, so a SIGBUS shows as a return code (-7, or 135 from a shell)
instead of killing pytest; the disk is a small tmpfs mounted by root (skipped otherwise; the
checks themselves are unit-tested in ``tests/test_store_disk_space.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from safety_worker import write_pdf
from test_safety_faults import NEW, OLD, run_worker, tmpfs

OPENER = "import sys; from test_safety_faults import open_store; from pathlib import Path\n"
OPENER += "with open_store(Path(sys.argv[1])) as s: print('pages', s.count_pages())"


def run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    full_env.pop("DOCMEMO_MIN_FREE_MB", None)
    full_env.update(env or {})
    return subprocess.run(
        command,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )


def docmemo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "llama_index_docmemo.cli", *args], env)


def leave_free(disk: Path, free_bytes: int) -> Path:
    """Fill ``disk`` until ``free_bytes`` are left; returns the ballast file to delete."""
    ballast = disk / "ballast"
    ballast.unlink(missing_ok=True)
    stats = os.statvfs(disk)
    with ballast.open("wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, stats.f_bavail * stats.f_frsize - free_bytes)
    return ballast


def assert_refused(result: subprocess.CompletedProcess, store: Path, code: int) -> None:
    """An exit with a message, never a signal."""
    output = result.stdout + result.stderr
    assert result.returncode >= 0 and result.returncode != 128 + signal.SIGBUS, (
        f"killed by signal (exit {result.returncode}; -7 / 135 = SIGBUS): {output[-2000:]}"
    )
    assert result.returncode == code, output[-2000:]
    assert str(store) in output and "the disk is full" in output, output[-2000:]
    assert "MiB free" in output and "needed" in output and "free at least" in output, output


@pytest.mark.slow
def test_no_command_dies_of_sigbus_on_a_full_disk(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_pdf(docs / "book.pdf", OLD)
    later = write_pdf(tmp_path / "later" / "more.pdf", NEW)
    with tmpfs(tmp_path / "disk", 1024) as disk:
        store, crashed = disk / "store", disk / "crashed"
        indexed = docmemo("index", str(docs), "--store", str(store), "--quiet")
        assert indexed.returncode == 0, indexed.stdout + indexed.stderr
        assert run_worker(crashed, docs).returncode == 0
        write_pdf(docs / "book.pdf", NEW)  # a new version, killed once its pages are written
        killed = run(
            [sys.executable, "safety_worker.py", str(crashed), str(docs), "--tenant", "acme"]
            + ["--fault", "pages-written:kill"]
        )
        assert killed.returncode == -signal.SIGKILL

        for free in (128 << 10, 3 << 20):  # before: 128 KiB killed the crashed open, 3 MiB `list`
            ballast = leave_free(disk, free)
            commands = [
                ["list"],
                ["search", "walrus tariff"],
                ["ask", "What is the walrus tariff?"],
                ["delete", "book.pdf"],
                ["index", str(later.parent), "--quiet"],
            ]
            for args in commands:
                assert_refused(docmemo(*args, "--store", str(store)), store, 2)
            for setting in ("0", "64"):
                result = docmemo(
                    "index",
                    str(later.parent),
                    "--store",
                    str(store),
                    "--quiet",
                    env={"DOCMEMO_MIN_FREE_MB": setting},
                )
                assert_refused(result, store, 2)
            assert_refused(run([sys.executable, "-c", OPENER, str(crashed)]), crashed, 1)
            ballast.unlink()

        # opens (32 MiB kept free and the segment files' holes, about 12 MiB here); page writes
        # keep 256 MiB unless told 0
        ballast = leave_free(disk, 64 << 20)
        margin = docmemo("index", str(later.parent), "--store", str(store), "--quiet")
        assert_refused(margin, store, 3)  # its one file failed: nothing was indexed
        assert "not attempted" not in margin.stdout
        zero = docmemo(
            "index",
            str(later.parent),
            "--store",
            str(store),
            "--quiet",
            env={"DOCMEMO_MIN_FREE_MB": "0"},
        )
        assert zero.returncode == 0, zero.stdout + zero.stderr
        ballast.unlink()

        listed = docmemo("list", "--store", str(store))  # space freed: everything still there
        assert listed.returncode == 0, listed.stderr
        assert "book.pdf\t4 pages" in listed.stdout and "more.pdf\t7 pages" in listed.stdout
        reopened = run([sys.executable, "-c", OPENER, str(crashed)])
        assert reopened.returncode == 0 and "pages 4" in reopened.stdout, reopened.stderr
        assert "cleaned 1 interrupted" in reopened.stderr


def test_opening_a_cp_r_copy_on_a_memory_disk_is_refused_not_killed(tmp_path: Path) -> None:
    """``cp -r`` copies the store's mapped files sparse; opening the copy on tmpfs fills their
    holes (about 190 MiB for a small store): with less free, a message, never SIGBUS."""
    docs = tmp_path / "docs"
    write_pdf(docs / "book.pdf", OLD)
    store = tmp_path / "store"
    indexed = docmemo("index", str(docs), "--store", str(store), "--quiet")
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    with tmpfs(tmp_path / "small", 120) as disk:
        copy = disk / "copy"
        subprocess.run(["cp", "-r", str(store), str(copy)], check=True)
        assert_refused(docmemo("search", "walrus tariff", "--store", str(copy)), copy, 2)
        assert "sparse segment files" in docmemo("list", "--store", str(copy)).stderr
    with tmpfs(tmp_path / "large", 400) as disk:
        copy = disk / "copy"
        subprocess.run(["cp", "-r", str(store), str(copy)], check=True)
        listed = docmemo("list", "--store", str(copy))
        assert listed.returncode == 0 and "book.pdf" in listed.stdout, listed.stderr
