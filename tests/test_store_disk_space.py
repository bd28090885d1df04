"""The free-space checks of the embedded store, with the disk's free space stubbed (issue 24).

The real full disk (a tmpfs, root only) is in ``integration_tests/test_disk_full.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from llama_index_docmemo.errors import StoreError
from llama_index_docmemo.store import EdgePageStore
from llama_index_docmemo.store import disk_space as ds

MIB = 1 << 20


class Usage(NamedTuple):
    total: int
    used: int
    free: int


def stub_free(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda _: Usage(1 << 40, 0, free))


def open_store(path: Path) -> EdgePageStore:
    return EdgePageStore(path, encoder_name="stub", dim=4)


def test_opening_refuses_below_the_floor_and_names_folder_free_and_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub_free(monkeypatch, 3 * MIB)
    with pytest.raises(StoreError) as caught:
        ds.check_open(tmp_path / "store")
    message = str(caught.value)
    assert f"cannot open page store {tmp_path / 'store'}" in message
    assert "the disk is full: 3.0 MiB free, 32.0 MiB needed" in message
    assert "free at least 29 MiB more" in message and "nothing stored is lost" in message
    stub_free(monkeypatch, ds.FLOOR_BYTES)
    ds.check_open(tmp_path / "store")


def test_opening_counts_the_write_ahead_log_it_may_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wal").mkdir()
    (tmp_path / "wal" / "open-1").write_bytes(b"x" * (2 * MIB))
    stub_free(monkeypatch, ds.FLOOR_BYTES + MIB)
    with pytest.raises(StoreError, match=r"2\.0 MiB of write-ahead log to replay"):
        ds.check_open(tmp_path)


@pytest.mark.parametrize("setting", ["0", "0.5", "16"])
def test_a_margin_under_the_floor_still_keeps_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv(ds.MIN_FREE_ENV, setting)
    assert ds.write_margin() == ds.FLOOR_BYTES
    stub_free(monkeypatch, 20 * MIB)
    with pytest.raises(StoreError, match=r"cannot write to page store .*20\.0 MiB free"):
        ds.check_write(tmp_path, 1000)
    with pytest.raises(StoreError, match="32.0 MiB needed"):
        ds.check_write(tmp_path)


def test_page_writes_keep_the_margin_and_three_times_their_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ds.MIN_FREE_ENV, raising=False)
    assert ds.write_margin() == ds.DEFAULT_MARGIN_BYTES
    stub_free(monkeypatch, ds.DEFAULT_MARGIN_BYTES + 3 * MIB)
    ds.check_write(tmp_path, MIB)
    with pytest.raises(StoreError, match=r"256\.0 MiB kept free .* \+ 3\.0 MiB for the pages"):
        ds.check_write(tmp_path, MIB + 1)


@pytest.mark.parametrize("setting", ["lots", "-5"])
def test_a_bad_margin_setting_is_named(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(ds.MIN_FREE_ENV, setting)
    with pytest.raises(StoreError, match=rf"\$DOCMEMO_MIN_FREE_MB='{setting}' is not a number"):
        ds.write_margin()


def test_the_store_refuses_to_open_or_create_before_touching_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(tmp_path / "store").close()
    with monkeypatch.context() as patch:
        stub_free(patch, MIB)
        with pytest.raises(StoreError, match=r"cannot open page store .*store: No space left"):
            open_store(tmp_path / "store")
        with pytest.raises(StoreError, match=r"cannot create page store .*new: No space left"):
            open_store(tmp_path / "new")
    assert not (tmp_path / "new").exists()
    with open_store(tmp_path / "store") as store:  # space back: opens, nothing lost
        assert store.count_pages() == 0
