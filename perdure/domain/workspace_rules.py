"""A session's workspace (pure): its bounds, and a file's name inside it, never a path on any
host. docs/workspace.md.

A name is refused, not repaired, so what a client or a model asked for is what is stored:
slash-separated segments, no empty, `.` or `..` segment, no leading slash, no backslash, no
NUL or other control character, at most `MAX_PATH_BYTES` in UTF-8 and `MAX_SEGMENT_BYTES` a
segment."""

from dataclasses import dataclass

MAX_PATH_BYTES = 512
MAX_SEGMENT_BYTES = 255


class BadPath(ValueError):
    """A name that is no file of a workspace; the message says why."""


def checked_path(path: str) -> str:
    if not path:
        raise BadPath("a file name is not empty")
    if len(path.encode()) > MAX_PATH_BYTES:
        raise BadPath(f"a file name is at most {MAX_PATH_BYTES} bytes")
    if any(ord(character) < 32 or ord(character) == 127 for character in path):
        raise BadPath("a file name has no NUL or other control character")
    if "\\" in path:
        raise BadPath("a file name separates folders with /, not \\")
    if path.startswith("/"):
        raise BadPath("a file name is relative to the workspace: no leading /")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise BadPath(f"a file name has no empty, . or .. part: {path!r}")
        if len(segment.encode()) > MAX_SEGMENT_BYTES:
            raise BadPath(f"a part of a file name is at most {MAX_SEGMENT_BYTES} bytes")
    return path


@dataclass(frozen=True)
class WorkspaceLimits:
    max_file_bytes: int
    max_total_bytes: int
    max_files: int
