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


WORKSPACE_TOOLS = (
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "find_files",
    "grep",
    "delete_file",
)
CHANGING_TOOLS = ("write_file", "edit_file", "delete_file")
"""What `workspace_approval = True` puts behind a person's approval."""


def chosen_tools(
    agent_name: str, chosen: object, every: tuple[str, ...], what: str
) -> tuple[str, ...]:
    """An agent's `workspace_tools` / `workspace_approval` as tool names: True is `every`,
    False none, a tuple those names; ValueError for anything else."""
    if chosen is True:
        return every
    if chosen is False or chosen == ():
        return ()
    if not isinstance(chosen, tuple) or not all(isinstance(name, str) for name in chosen):
        raise ValueError(f"agent {agent_name!r}: {what} is True, False or a tuple of tool names")
    unknown = [name for name in chosen if name not in WORKSPACE_TOOLS]
    if unknown:
        raise ValueError(
            f"agent {agent_name!r}: {what} names no workspace tool {', '.join(unknown)}; "
            f"they are {', '.join(WORKSPACE_TOOLS)}"
        )
    return chosen
