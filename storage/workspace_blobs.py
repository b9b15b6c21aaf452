"""Large workspace contents as files of a blob directory (`PERDURE_WORKSPACE_BLOB_DIR`,
docs/workspace.md#large-files), so they do not swell the store's rows.

A blob is written whole, synced and renamed into place before the transaction that names it
commits, so a committed row never names a blob that is not there. Names are never reused (a
random name per write), so a blob changes only by being deleted: `sweep` deletes those no row
names once they are older than a grace period longer than any transaction (a change that
died before its commit leaves one behind, a deleted file or session leaves theirs). The
directory is the store's: every gateway and worker of a deployment must see the same one.
"""

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.errors import BlobMissing

SWEEP_GRACE_SECONDS = 3600.0
"""A blob no row names is kept this long: a write's transaction may not have committed yet."""
PARTIAL = ".part"


def usable_directory(path: Path) -> Path:
    """`path` made absolute (every process must name the same directory), created if missing
    (private to this user), and checked writable; a `ValueError` saying why not."""
    path = path.expanduser().resolve()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot use {path} for workspace blobs: {error.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"cannot use {path} for workspace blobs: not writable by this user")
    return path


@dataclass(frozen=True)
class BlobDirectory:
    path: Path
    min_bytes: int
    """Contents at least this large go to the directory; smaller ones stay in the row."""

    def holds(self, content: bytes) -> bool:
        return len(content) >= self.min_bytes

    def put(self, content: bytes) -> str:
        """Write `content` as a new blob and return its name (blocking: run in a thread)."""
        name = uuid.uuid4().hex
        target = self._file(name)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = target.with_name(name + PARTIAL)
        with open(partial, "xb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, target)
        return name

    def get(self, name: str) -> bytes:
        """The blob's content (blocking: run in a thread)."""
        try:
            return self._file(name).read_bytes()
        except FileNotFoundError:
            raise BlobMissing(
                f"the workspace blob {name} is not in {self.path}: every gateway and worker "
                "must share one PERDURE_WORKSPACE_BLOB_DIR"
            ) from None

    def sweep(self, named: set[str], *, cutoff: float) -> int:
        """Delete the blobs not in `named` (and unfinished writes) last changed before
        `cutoff` (a time); returns how many. Blocking: run in a thread. `named` must be read
        after `cutoff` was taken: then a row committed since that names a blob written before
        the cutoff would belong to a transaction longer than the grace period."""
        deleted = 0
        for file in self._files():
            if file.name in named:
                continue
            try:
                if file.stat().st_mtime >= cutoff:
                    continue
                file.unlink()
            except FileNotFoundError:
                continue
            deleted += 1
        return deleted

    def _file(self, name: str) -> Path:
        if len(name) != 32 or not all(c in "0123456789abcdef" for c in name):
            raise BlobMissing(f"{name!r} is not a blob's name")
        return self.path / name[:2] / name

    def _files(self) -> Iterator[Path]:
        if not self.path.is_dir():
            return
        for shard in self.path.iterdir():
            if shard.is_dir() and len(shard.name) == 2:
                yield from shard.iterdir()
