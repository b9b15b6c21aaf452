"""A wake-up hint that a message log grew. Never the data itself: readers re-read the log."""

from collections.abc import Callable, Collection

Listener = Callable[[str | None], None]
"""Called with the id of a log that grew, or None: any log may have grown unannounced."""
Forward = Callable[[Collection[str]], None]
"""Sends the ids of logs this process grew to the store's other processes."""


class ChunkBus:
    """In-process bus. `reliable` means every append in the system reaches this bus."""

    def __init__(self, *, reliable: bool) -> None:
        self._reliable = reliable
        self._listeners: list[Listener] = []
        self._forward: Forward | None = None

    @property
    def reliable(self) -> bool:
        return self._reliable

    @reliable.setter
    def reliable(self, value: bool) -> None:
        if value != self._reliable:
            self._reliable = value
            # Hints were lost before it became reliable, or stop coming now: read everything.
            self._tell(None)

    def forward_to(self, forward: Forward) -> None:
        """Send what is published here on to the store's other processes too (SQLite's socket
        bus; PostgreSQL's NOTIFY goes out with the commit instead)."""
        self._forward = forward

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` on every hint until the returned function is called."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def publish(self, *message_ids: str) -> None:
        """Logs this process appended to, once committed: tell this process's listeners and
        (forwarded) the other processes, in one message for all."""
        for message_id in message_ids:
            self._tell(message_id)
        if self._forward is not None and message_ids:
            self._forward(message_ids)

    def heard(self, message_id: str | None) -> None:
        """A hint from another process: for this process's listeners only."""
        self._tell(message_id)

    def _tell(self, message_id: str | None) -> None:
        for listener in self._listeners:
            listener(message_id)
