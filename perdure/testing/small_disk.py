"""A small filesystem of its own, and filling it: a full disk under a store, for the disk-full
specification and the faults benchmark. Mounting a tmpfs needs root and mount(8)."""

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

DISK_BYTES = 16 * 1024 * 1024


def disk_unavailable() -> str | None:
    """None when a tmpfs can be mounted here; otherwise why not."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return "a full disk is made by mounting a 16 MB tmpfs, which needs root and mount(8)"
    return None


@contextlib.contextmanager
def small_disk(parent: Path) -> Iterator[Path]:
    """A 16 MB tmpfs mounted at `parent / "disk"` for the block."""
    disk = parent / "disk"
    disk.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)], check=True
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk`; the file that took them (delete it to free them)."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    block = b"\0" * 65_536
    try:
        while True:
            os.write(descriptor, block)
    except OSError as full:
        if full.errno != errno.ENOSPC:
            raise
    finally:
        os.close(descriptor)
    return filler
