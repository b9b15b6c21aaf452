"""A wake-up hint that a message log grew. Never the data itself: readers re-read the log."""

import asyncio


class ChunkBus:
    """In-process bus. `reliable` means every append in the system reaches `publish` here."""

    def __init__(self, *, reliable: bool) -> None:
        self.reliable = reliable
        self._waiters: dict[str, asyncio.Event] = {}

    def waiter(self, message_id: str) -> asyncio.Event:
        """Take the waiter *before* reading the log so an append in between is not missed."""
        waiter = self._waiters.get(message_id)
        if waiter is None:
            waiter = self._waiters[message_id] = asyncio.Event()
        return waiter

    def publish(self, message_id: str) -> None:
        waiter = self._waiters.pop(message_id, None)
        if waiter is not None:
            waiter.set()
