"""A wake-up hint that a message log grew. Never the data itself: readers re-read the log."""

from collections.abc import Callable

Listener = Callable[[str | None], None]
"""Called with the id of a log that grew, or None: any log may have grown unannounced."""


class ChunkBus:
    """In-process bus. `reliable` means every append in the system reaches `publish` here."""

    def __init__(self, *, reliable: bool) -> None:
        self._reliable = reliable
        self._listeners: list[Listener] = []

    @property
    def reliable(self) -> bool:
        return self._reliable

    @reliable.setter
    def reliable(self, value: bool) -> None:
        if value != self._reliable:
            self._reliable = value
            # Hints were lost before it became reliable, or stop coming now: read everything.
            self._tell(None)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` on every publish until the returned function is called."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def publish(self, message_id: str) -> None:
        self._tell(message_id)

    def _tell(self, message_id: str | None) -> None:
        for listener in self._listeners:
            listener(message_id)
