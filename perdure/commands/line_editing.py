"""Line editing at `perdure chat`'s prompt: arrow keys, Ctrl-A/Ctrl-E and the other readline
keys, and Up (or Ctrl-P) for the messages sent earlier, in this run and in earlier ones. rich's
`Console.input` reads with `input()`, which the standard `readline` module enhances once it is
imported; it is imported only for an interactive chat, so scripts and pipes never see it.

The messages are kept in a file only you may read (`PERDURE_CHAT_HISTORY`, by default
`$XDG_STATE_HOME/perdure/chat_history`; empty: not kept), the last `HISTORY_LINES` of them.
Answers to approval questions are never kept."""

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

HISTORY_LINES = 1000

_readline: ModuleType | None = None
_history: Path | None = None


def history_file(environ: Mapping[str, str]) -> Path | None:
    configured = environ.get("PERDURE_CHAT_HISTORY")
    if configured is not None:
        return Path(configured).expanduser() if configured.strip() else None
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "perdure" / "chat_history"


def enable(history: Path | None) -> None:
    """Line editing, with the messages of earlier runs from `history` (None: none kept)."""
    global _readline, _history
    with contextlib.suppress(ImportError):  # not built on every platform (Windows)
        import readline

        _readline = readline
    if _readline is None or history is None:
        return
    _readline.set_history_length(HISTORY_LINES)
    try:
        if history.exists():
            _readline.read_history_file(str(history))
            _readline.write_history_file(str(history))  # trimmed to HISTORY_LINES
        _history = history
    except OSError:
        _history = None  # unreadable or unwritable: this run's messages only


def remember_last_line() -> None:
    """Keep the message just sent for later runs (appended at once: a killed chat loses none,
    and two chats at once both keep theirs)."""
    if _readline is None or _history is None:
        return
    with contextlib.suppress(OSError):
        _history.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(_history, os.O_WRONLY | os.O_CREAT, 0o600))
        _readline.append_history_file(1, str(_history))


def forget_last_line() -> None:
    """Keep an answer to a question (`allow it? [y/n]`) out of the history of messages."""
    if _readline is not None and (length := _readline.get_current_history_length()) > 0:
        _readline.remove_history_item(length - 1)
