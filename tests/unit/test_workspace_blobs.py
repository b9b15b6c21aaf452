"""The workspace blob directory's files (storage/workspace_blobs.py): written whole under new
names, read back, swept only when unnamed and old, and a directory checked at start."""

import os
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from perdure.runtime.settings import Settings
from storage.errors import BlobMissing
from storage.workspace_blobs import PARTIAL, BlobDirectory, usable_directory


def aged(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_blob_is_written_under_a_new_name_each_time_and_read_back(tmp_path: Path) -> None:
    blobs = BlobDirectory(tmp_path, min_bytes=4)

    first, second = blobs.put(b"same"), blobs.put(b"same")

    assert first != second
    assert blobs.get(first) == blobs.get(second) == b"same"
    assert not list(tmp_path.rglob(f"*{PARTIAL}"))
    assert (blobs.holds(b"abc"), blobs.holds(b"abcd")) == (False, True)


def test_a_sweep_deletes_only_unnamed_blobs_older_than_its_cutoff(tmp_path: Path) -> None:
    blobs = BlobDirectory(tmp_path, min_bytes=1)
    named_old, unnamed_old, unnamed_young = blobs.put(b"a"), blobs.put(b"b"), blobs.put(b"c")
    for name in (named_old, unnamed_old):
        aged(tmp_path / name[:2] / name, 7200)
    partial = tmp_path / unnamed_old[:2] / f"{'0' * 32}{PARTIAL}"  # a write that died
    partial.write_bytes(b"half")
    aged(partial, 7200)

    swept = blobs.sweep({named_old}, cutoff=time.time() - 3600)

    assert swept == 2
    assert blobs.get(named_old) == b"a"
    assert blobs.get(unnamed_young) == b"c"
    with pytest.raises(BlobMissing):
        blobs.get(unnamed_old)
    assert not partial.exists()


def test_a_name_that_is_not_a_blob_name_reads_nothing(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"not a blob")
    blobs = BlobDirectory(tmp_path / "blobs", min_bytes=1)

    for name in ("../secret", "/etc/passwd", "0" * 31, "G" * 32):
        with pytest.raises(BlobMissing, match="is not a blob's name"):
            blobs.get(name)


def test_a_blob_directory_is_made_absolute_and_created_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    made = usable_directory(Path("data/blobs"))

    assert made == tmp_path / "data" / "blobs"
    assert made.is_dir()
    assert made.stat().st_mode & 0o777 == 0o700


def test_a_blob_directory_that_is_a_file_is_refused_at_start(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file")

    with pytest.raises(ValidationError, match="cannot use .*taken for workspace blobs"):
        Settings.model_validate({"PERDURE_WORKSPACE_BLOB_DIR": str(taken)})
