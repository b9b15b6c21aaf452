"""Line editing at `perdure chat`'s prompt: arrow keys, Ctrl-A/Ctrl-E and the other readline
keys, and Up (or Ctrl-P) for the messages sent earlier in this run. rich's `Console.input`
reads with `input()`, which the standard `readline` module enhances once it is imported;
it is imported only for an interactive chat, so scripts and pipes never see it."""

import contextlib
from types import ModuleType

_readline: ModuleType | None = None


def enable() -> None:
    global _readline
    with contextlib.suppress(ImportError):  # not built on every platform (Windows)
        import readline

        _readline = readline


def forget_last_line() -> None:
    """Keep an answer to a question (`allow it? [y/n]`) out of the history of messages."""
    if _readline is not None and (length := _readline.get_current_history_length()) > 0:
        _readline.remove_history_item(length - 1)
